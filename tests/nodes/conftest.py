"""Fixtures of the node tests that attack a thread through its saver."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gated_react import open_checkpointer


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    """A real SQLite saver in a fresh file (what the state API's attacks write through)."""
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        yield saver
