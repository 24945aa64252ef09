"""The latest runs in a store, fast on big stores.

One SQL query finds the newest checkpoint id per thread (checkpoint ids are time-ordered UUIDs,
and the savers' primary key ``(thread_id, checkpoint_ns, checkpoint_id)`` serves the grouping);
then only the rows shown are loaded, without building a graph or replaying any history.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from gated_react.cli.exits import readable
from gated_react.cli.run_options import RunOptions

_LATEST = (
    "SELECT thread_id, MAX(checkpoint_id) AS latest FROM checkpoints "
    "WHERE checkpoint_ns = '' GROUP BY thread_id ORDER BY latest DESC LIMIT {param}"
)
_COUNT = "SELECT COUNT(DISTINCT thread_id) AS n FROM checkpoints WHERE checkpoint_ns = ''"


@dataclass(frozen=True, slots=True)
class RunRow:
    """One thread as ``gated-react runs`` lists it."""

    thread_id: str
    status: str
    stop_reason: str | None
    steps: int
    tokens: int
    cost: float | None
    """US dollars; None when unpriced or stored before costs were recorded."""
    updated: str
    goal: str
    model: str | None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def latest_runs(saver: Any, limit: int) -> tuple[list[RunRow], int]:
    """The ``limit`` most recently updated threads, newest first, and how many there are."""
    ids, total = _latest_ids(saver, limit)
    rows = []
    for thread_id, checkpoint_id in ids:
        config = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": "",
                "checkpoint_id": checkpoint_id,
            }
        }
        with readable(thread_id):
            found = saver.get_tuple(config)
            if found is not None:
                rows.append(_row(thread_id, found))
    return rows, total


def _latest_ids(saver: Any, limit: int) -> tuple[list[tuple[str, str]], int]:
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        with saver.lock:
            rows = conn.execute(_LATEST.format(param="?"), (limit,)).fetchall()
            total = conn.execute(_COUNT).fetchone()[0]
        return [(r[0], r[1]) for r in rows], int(total)
    if type(conn).__module__.startswith(("psycopg", "psycopg_pool")):
        with saver.lock, _pg(conn) as pg, pg.cursor() as cur:
            cur.execute(_LATEST.format(param="%s"), (limit,))
            rows = cur.fetchall()
            cur.execute(_COUNT)
            total = cur.fetchone()["n"]
        return [(r["thread_id"], r["latest"]) for r in rows], int(total)
    return _scan(saver, limit)


@contextmanager
def _pg(conn: Any) -> Iterator[Any]:
    """A connection from a psycopg connection or pool (PostgresSaver takes either)."""
    if hasattr(conn, "getconn"):  # a pool
        with conn.connection() as pooled:
            yield pooled
    else:
        yield conn


def _scan(saver: Any, limit: int) -> tuple[list[tuple[str, str]], int]:
    """Any other saver (the in-memory one): walk every checkpoint."""
    latest: dict[str, str] = {}
    for item in saver.list(None):
        conf = item.config["configurable"]
        if conf.get("checkpoint_ns", "") == "":
            thread, checkpoint = conf["thread_id"], conf["checkpoint_id"]
            latest[thread] = max(latest.get(thread, ""), checkpoint)
    ordered = sorted(latest.items(), key=lambda kv: kv[1], reverse=True)
    return ordered[:limit], len(latest)


def _row(thread_id: str, found: Any) -> RunRow:
    values = found.checkpoint.get("channel_values", {})
    usage = values.get("usage") or {}
    waiting = any(write[1] == "__interrupt__" for write in found.pending_writes or ())
    status = values.get("status") or ("paused" if waiting else "unfinished")
    options = RunOptions.from_metadata(found.metadata)
    return RunRow(
        thread_id=thread_id,
        status=status,
        stop_reason=values.get("stop_reason"),
        steps=int(usage.get("steps", 0)),
        tokens=int(usage.get("tokens", 0)),
        cost=cost if isinstance(cost := usage.get("cost"), int | float) else None,
        updated=_local(found.checkpoint.get("ts", "")),
        goal=str(values.get("goal", "")),
        model=options.model if options else None,
    )


def _local(ts: str) -> str:
    try:
        return datetime.fromisoformat(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return ts
