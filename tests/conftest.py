"""Test-wide settings and fixtures."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .reliability import tally
from .support import fakes, pg
from .support.mcp_servers import own_tools
from .support.openai_server import FakeOpenAI
from .support.phoenix import Phoenix, phoenix_server

if TYPE_CHECKING:
    from gated_react.mcp import MCPTools

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


# Under pytest-xdist (`make check`, `make test`: `--dist worksteal`) each worker process starts
# the session servers it needs for itself. worksteal hands each worker a contiguous share of
# the tests in collection order and moves only the tail of a queue, so the tests of each server
# go first, server by server: in a full run the first worker runs them all, each server starts
# once. (`--dist loadgroup` would say so with marks, but pytest-xdist 3.8 cannot group on pytest
# 9.2: pytest-xdist issue 1386.) A test marked for both goes with Phoenix, the slower to start.
SESSION_SERVERS = ("phoenix", "studio")  # the fixtures below, each marked by its marker's name


def _server_of(item: pytest.Item) -> int:
    """The index of the first session server ``item`` is marked for, else one past the last."""
    marked = [i for i, name in enumerate(SESSION_SERVERS) if item.get_closest_marker(name)]
    return marked[0] if marked else len(SESSION_SERVERS)


@pytest.hookimpl(trylast=True)  # after deselection and pytest's own ordering by fixture
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        uses = getattr(item, "fixturenames", ())
        unmarked = [
            name for name in SESSION_SERVERS if name in uses and not item.get_closest_marker(name)
        ]
        if unmarked:  # `make check` deselects by marker: it would start the server
            raise pytest.UsageError(f"{item.nodeid} uses {unmarked[0]}: mark it {unmarked[0]}")
    items.sort(key=_server_of)  # stable: the order within each share stays pytest's


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook, on the controller
def pytest_testnodedown(node: Any, error: object) -> None:
    """A worker's reliability figures (``tests/reliability/tally.py``) join the controller's."""
    tally.merge(getattr(node, "workeroutput", {}).get(tally.KEY))


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)  # set on an xdist worker only
    if output is not None:
        output[tally.KEY] = tally.snapshot()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not tally.COUNTS and not tally.SERIES:
        return
    write = terminalreporter.write_line
    terminalreporter.section("reliability figures")
    for name, value in sorted(tally.COUNTS.items()):
        write(f"{name}: {value}")
    for name, values in tally.SERIES.items():
        write(f"{name}: {values}")


@pytest.fixture(autouse=True)
def _fresh_fakes() -> None:
    """Every test starts with empty logs of what the fakes of ``tests/support/fakes.py`` ran."""
    for log in (fakes.RAN, fakes.SENT, fakes.FLAKY):
        log.clear()


@pytest.fixture(params=["stdio", "http"])
def own_mcp(request: pytest.FixtureRequest) -> Iterator[tuple[MCPTools, str]]:
    """The tools of a notes server (``tests/support/mcp_servers.py``) of the test's own, over
    stdio and over HTTP, and their prefix: for a test that crashes or hangs its server."""
    with own_tools(request.param) as tools:
        yield tools, tools[0].server


@pytest.fixture(scope="module", params=["stdio", "http"])
def shared_mcp(request: pytest.FixtureRequest) -> Iterator[tuple[MCPTools, str]]:
    """``own_mcp`` shared by a module's tests (a server start costs seconds): each leaves it
    working, and reads its ledger as what was added to it."""
    with own_tools(request.param) as tools:
        yield tools, tools[0].server


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


@pytest.fixture(scope="module")
def dev(
    studio: DevServer, studio_model: FakeOpenAI, request: pytest.FixtureRequest
) -> Iterator[DevServer]:
    """The session's ``langgraph dev`` for one module: its model answers what the module's tests
    push, else with the module's ``STUDIO_DEFAULT`` (a function of the request), else 500;
    ``studio_model.requests`` holds the module's requests only."""
    with studio_model.playing(default=getattr(request.module, "STUDIO_DEFAULT", None)):
        yield studio


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
