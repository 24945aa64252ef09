"""What every connection of a Postgres saver is opened with, and the savers' setup taken in
turns by the processes that open a fresh database at once (``checkpointer``; the workers'
pools open their connections with ``pg_kwargs`` too)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

# Many workers may open a fresh database at once; PostgresSaver.setup() is not safe to run
# concurrently (duplicate-key errors on its migration table), so its callers take turns. They
# poll with short statements: one blocked in pg_advisory_lock() would be an open transaction,
# which the holder's CREATE INDEX CONCURRENTLY waits for (a deadlock). Two-key advisory locks
# never collide with the one-key locks in ``locks.py``.
SETUP_TRY = "SELECT pg_try_advisory_lock(1735549284, 1) AS ok"
SETUP_UNLOCK = "SELECT pg_advisory_unlock(1735549284, 1)"
SETUP_POLL_SECONDS = 0.05
SETUP_WAIT_SECONDS = 120.0


def _setup_turns() -> Iterator[float]:
    """Pauses between tries for the setup lock; runs out after SETUP_WAIT_SECONDS."""
    for _ in range(int(SETUP_WAIT_SECONDS / SETUP_POLL_SECONDS)):
        yield SETUP_POLL_SECONDS
    raise TimeoutError(f"another process held the setup lock for {SETUP_WAIT_SECONDS:g} s")


def pg_setup(conn: Any, saver: Any) -> None:
    for pause in _setup_turns():
        if conn.execute(SETUP_TRY).fetchone()["ok"]:
            break
        time.sleep(pause)
    try:
        saver.setup()
    finally:
        conn.execute(SETUP_UNLOCK)


async def apg_setup(conn: Any, saver: Any) -> None:
    for pause in _setup_turns():
        if (await (await conn.execute(SETUP_TRY)).fetchone())["ok"]:
            break
        await asyncio.sleep(pause)
    try:
        await saver.setup()
    finally:
        await conn.execute(SETUP_UNLOCK)


def pg_kwargs() -> dict[str, Any]:
    """What every connection a Postgres saver uses is opened with (workers' pools too)."""
    from psycopg.rows import dict_row

    # PostgresSaver needs these, or setup() fails on a fresh database (CREATE INDEX CONCURRENTLY).
    return {
        "autocommit": True,
        "row_factory": dict_row,
        "prepare_threshold": 0,
        "connect_timeout": 10,
    }


def unreachable(target: str, seconds: float) -> str | None:
    """Why the Postgres server at ``target`` cannot be used now (one line), or None when it
    answers a query within ``seconds``: what a readiness probe asks, since a connection an idle
    process holds is found closed only when it is next used."""
    import psycopg

    from gated_react.errors import exception_line

    millis = int(seconds * 1000)
    try:
        with psycopg.connect(
            target, connect_timeout=max(int(seconds), 1), options=f"-c statement_timeout={millis}"
        ) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # any failure to reach or query it is the answer
        return exception_line(exc, target)
    return None
