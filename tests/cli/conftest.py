"""CLI fixtures: an isolated state folder (never the real XDG one), a scripted model server, and
every CLI process a test started reaped with it. What tests call is in ``tests/support/cli.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..support.cli import reap_spawned
from ..support.openai_server import FakeOpenAI

_ENV = ("GATED_REACT_DB", "GATED_REACT_STORE", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL")


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI's state folder under tmp; no model configured and no retries by default."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "0")
    monkeypatch.setenv("OPENAI_TIMEOUT_SECONDS", "10")
    return tmp_path / "xdg" / "gated-react"


@pytest.fixture
def server(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A chat-completions server the CLI finds through OPENAI_BASE_URL; push its script."""
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        yield fake


@pytest.fixture(autouse=True)
def _reap_spawned() -> Iterator[None]:
    yield
    reap_spawned()
