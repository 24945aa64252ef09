"""Checkpointers for benchmark runs: none, in memory, an SQLite file on disk, Postgres if given."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

POSTGRES_ENV = "GATED_REACT_BENCH_POSTGRES_URL"


@contextlib.contextmanager
def saver(kind: str, folder: Path | None = None) -> Iterator[Any]:
    """A fresh checkpointer of ``kind`` (none | memory | sqlite)."""
    if kind == "none":
        yield None
    elif kind == "memory":
        yield InMemorySaver()
    elif kind == "sqlite":
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            conn = sqlite3.connect(Path(tmp) / "runs.sqlite", check_same_thread=False)
            try:
                yield SqliteSaver(conn)
            finally:
                conn.close()
    else:
        raise ValueError(kind)


def sqlite_bytes(path: Path) -> int:
    """Bytes of an SQLite store after folding its write-ahead log back into the file."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def postgres_url() -> str | None:
    return os.environ.get(POSTGRES_ENV) or None
