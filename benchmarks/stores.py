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

try:
    from gated_react.store.checkpointer import open_checkpointer
except ImportError:  # a tree from before store/ (benchmarks.ab measures one as its "before")
    from gated_react.checkpoint import open_checkpointer  # type: ignore[import-not-found,no-redef]

POSTGRES_ENV = "GATED_REACT_BENCH_POSTGRES_URL"
KEY = "benchmark-store-key-" + "0" * 44


@contextlib.contextmanager
def saver(kind: str, folder: Path | None = None) -> Iterator[Any]:
    """A fresh checkpointer of ``kind`` (none | memory | sqlite | sqlite-key | postgres);
    ``sqlite-key`` signs every row with a store key (``KEY``)."""
    if kind == "none":
        yield None
    elif kind == "memory":
        yield InMemorySaver()
    elif kind == "sqlite":  # configured as gated-react opens it (WAL, synchronous=NORMAL)
        with (
            tempfile.TemporaryDirectory(dir=folder) as tmp,
            open_checkpointer(str(Path(tmp) / "runs.sqlite")) as sqlite_saver,
        ):
            yield sqlite_saver
    elif kind == "sqlite-key":  # the same, every row signed and checked
        with (
            tempfile.TemporaryDirectory(dir=folder) as tmp,
            open_checkpointer(str(Path(tmp) / "runs.sqlite"), key=KEY) as keyed,
        ):
            yield keyed
    elif kind == "postgres":  # the cluster in GATED_REACT_BENCH_POSTGRES_URL; each run a new thread
        url = postgres_url()
        if url is None:
            raise ValueError(f"postgres needs {POSTGRES_ENV}")
        with open_checkpointer(url) as pg_saver:
            yield pg_saver
    else:
        raise ValueError(kind)


def sqlite_bytes(path: Path) -> int:
    """Bytes of an SQLite store after folding its write-ahead log back into the file."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def postgres_url() -> str | None:
    return os.environ.get(POSTGRES_ENV) or None
