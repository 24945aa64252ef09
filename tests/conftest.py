"""Test-wide settings and fixtures."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .support import pg
from .support.openai_server import FakeOpenAI
from .support.phoenix import Phoenix, phoenix_server

if TYPE_CHECKING:
    from .support.studio_server import DevServer

# Nothing in the test suite may reach a hosted API or send traces (the OpenTelemetry tests
# set the OTEL_* variables they need themselves).
os.environ["LANGSMITH_TRACING"] = "false"
os.environ.pop("OPENAI_API_KEY", None)
for _name in [name for name in os.environ if name.startswith("OTEL_")]:
    os.environ.pop(_name)

# A test run started in the background (`make test &`, nohup, a CI step without job control)
# ignores SIGINT, and every CLI it spawns would inherit that: the Ctrl-C tests need a CLI that
# gets Ctrl-C as a terminal delivers it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    """One ``phoenix serve`` for the session (it takes half a minute to start); tests tell
    their spans apart by trace and conversation id."""
    with phoenix_server(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


@pytest.fixture(scope="session")
def studio_model() -> Iterator[FakeOpenAI]:
    """The model server of the session's ``langgraph dev``; a module plays its own script or
    default on it (``FakeOpenAI.playing``)."""
    with FakeOpenAI() as model:
        yield model


@pytest.fixture(scope="session")
def studio(
    studio_model: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevServer]:
    """One ``langgraph dev`` for every Studio test of the run that needs no server of its own
    (a restart, other variables): it takes seconds to start, more on a loaded machine. Threads
    are told apart by id; it cleans up after itself when stopped."""
    from .support.studio_server import serving  # langgraph_sdk: only for the Studio tests

    with serving(tmp_path_factory.mktemp("studio"), studio_model) as server:
        yield server
    assert not (server.workdir / ".langgraph_api").exists()


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty Postgres database for this test (tests using it are marked ``postgres``)."""
    if request.node.get_closest_marker("postgres") is None:
        pytest.fail("a test that uses pg_url must be marked @pytest.mark.postgres", pytrace=False)
    url = pg.server_url()
    if url is None:
        pg.unavailable(f"{pg.URL_VAR} is not set")
        return
    with pg.fresh_database(url) as fresh:
        yield fresh


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The same test on a real SQLite file and on a fresh Postgres database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.sqlite'}"
    else:
        yield request.getfixturevalue("pg_url")
