"""The runs waiting on a question, the longest waiting first: one SQL query finds the threads
whose latest checkpoint holds a question no answer has reached yet (``run_listing`` loads them).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import partial
from typing import Any

from gated_react.records.run_listing import (
    REFUSED,
    Found,
    Reader,
    attempt,
    goal_of,
    load,
    local,
    local_id,
    scan,
    started_by,
    unread,
)
from gated_react.records.store import pg_connection

# Threads whose latest checkpoint holds an open question (an interrupt not yet answered),
# longest waiting first. ``{writes}``: the savers name the table of pending writes differently.
_WAITING_FROM = (
    " FROM (SELECT thread_id, MAX(checkpoint_id) AS latest"
    " FROM checkpoints WHERE checkpoint_ns = '' GROUP BY thread_id) AS c"
    " WHERE EXISTS (SELECT 1 FROM {writes} AS w WHERE w.thread_id = c.thread_id"
    " AND w.checkpoint_ns = '' AND w.checkpoint_id = c.latest AND w.channel = '__interrupt__')"
    " AND NOT EXISTS (SELECT 1 FROM {writes} AS w WHERE w.thread_id = c.thread_id"
    " AND w.checkpoint_ns = '' AND w.checkpoint_id = c.latest AND w.channel = '__resume__')"
)
_WAITING = "SELECT c.thread_id, c.latest" + _WAITING_FROM + " ORDER BY c.latest LIMIT {param}"
# How many wait, and since when the longest waiting one has (its checkpoint's time, as JSON).
_BACKLOG = "SELECT count(*) AS n, min(k.checkpoint->>'ts') AS since" + _WAITING_FROM.replace(
    " WHERE EXISTS",
    " JOIN checkpoints AS k ON k.thread_id = c.thread_id AND k.checkpoint_ns = ''"
    " AND k.checkpoint_id = c.latest WHERE EXISTS",
    1,
).format(writes="checkpoint_writes")


@dataclass(frozen=True, slots=True)
class QuestionRow:
    """One open question as ``gated-react questions`` lists it."""

    thread_id: str
    question: str
    tool: str | None
    args: Any
    kind: str | None
    step: int | None
    since: str
    goal: str
    started_by: str = "program"
    """``cli``, ``workers`` (the CLI tells them apart by the queue), ``langgraph`` (a LangGraph
    server) or ``program`` (the library): who answers its question (``started_by``)."""
    assistant_id: str | None = None
    """The LangGraph server's assistant that runs the thread (what an answer through the
    LangGraph SDK names); None for the other threads."""
    status: str = "paused"
    """``paused``, or why the thread was not read: ``unsigned``, ``unverified``, ``keyed``,
    ``damaged``."""
    problem: str | None = None
    """What to do about a thread that was not read."""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def waiting_runs(saver: Any, limit: int) -> list[QuestionRow]:
    """The open questions of up to ``limit`` threads, the longest waiting first."""
    rows: list[QuestionRow] = []
    reader = Reader(saver)
    for thread_id, checkpoint_id, found in load(saver, _waiting_ids(saver, limit)):
        asked = partial(_read, reader, found, thread_id, checkpoint_id)
        read = found if unread(found) else attempt(thread_id, asked)
        if (status := unread(read)) is not None:  # listed so, not a failed listing
            since = local_id(checkpoint_id)
            rows.append(QuestionRow(thread_id, "", None, None, None, None, since, "",
                                    status=status, problem=REFUSED[status]))  # fmt: skip
        elif isinstance(read, Found):
            rows.extend(_question(thread_id, read, one) for one in read.result["pending"])
    return rows


def _read(reader: Reader, found: Any, thread_id: str, checkpoint_id: str) -> Found | None:
    """A waiting thread read at its checkpoint (``found``, as stored): a write that holds
    anything but questions is damage."""
    for write in found.pending_writes or ():
        _asks(write)
    return reader.read(thread_id, checkpoint_id)


def questions_backlog(target: str) -> tuple[int, float]:
    """How many threads of the Postgres store at ``target`` wait on a question, and how many
    seconds the longest waiting one has (0 when none does): a count, no checkpoint decoded."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(
        target,
        autocommit=True,
        row_factory=dict_row,
        connect_timeout=5,
        options="-c statement_timeout=5000",  # a scrape never waits long on a busy store
    ) as conn:
        row = conn.execute(_BACKLOG).fetchone()
    if row is None or not row["n"]:
        return 0, 0.0
    since = datetime.fromisoformat(str(row["since"])).timestamp()
    return int(row["n"]), max(time.time() - since, 0.0)


def _question(thread_id: str, found: Found, asked: Any) -> QuestionRow:
    asked = asked if isinstance(asked, dict) else {"value": asked}
    step = asked.get("step")
    metadata = found.snapshot.metadata or {}
    by, assistant = started_by(metadata), metadata.get("assistant_id")
    return QuestionRow(
        thread_id=thread_id,
        question=str(asked.get("id", "")),
        tool=None if asked.get("tool") is None else str(asked["tool"]),
        args=asked.get("args"),
        kind=None if asked.get("kind") is None else str(asked["kind"]),
        step=step if isinstance(step, int) else None,
        since=local(found.snapshot.created_at or ""),
        goal=goal_of(found.result),
        started_by=by,
        assistant_id=str(assistant) if assistant and by == "langgraph" else None,
    )


def _asks(write: Any) -> bool:
    """A write of questions; one that holds anything but interrupts is damage, not silence."""
    if write[1] != "__interrupt__":
        return False
    if not isinstance(write[2], list | tuple):
        raise TypeError(f"its open question decodes to {type(write[2]).__name__}")
    return True


def _waiting_ids(saver: Any, limit: int) -> list[tuple[str, str]]:
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        with saver.lock:
            query = _WAITING.format(writes="writes", param="?")
            return [(r[0], r[1]) for r in conn.execute(query, (limit,)).fetchall()]
    pg_conn = pg_connection(saver)
    if pg_conn is not None:
        with saver.lock, pg_conn as pg, pg.cursor() as cur:
            cur.execute(_WAITING.format(writes="checkpoint_writes", param="%s"), (limit,))
            return [(r["thread_id"], r["latest"]) for r in cur.fetchall()]
    ids, _ = scan(saver, None)  # any other saver (the in-memory one): check each thread
    waiting = [(thread, cid) for thread, cid, found in load(saver, ids) if _open(found)]
    return waiting[::-1][:limit]


def _open(found: Any) -> bool:
    """The checkpoint holds a question that no answer has reached yet."""
    if unread(found) is not None:
        return True  # listed as not read: whether it waits is not known
    channels = {write[1] for write in found.pending_writes or ()}
    return "__interrupt__" in channels and "__resume__" not in channels
