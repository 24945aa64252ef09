"""The latest runs in a store, fast on big stores.

One SQL query finds the newest checkpoint id per thread (checkpoint ids are time-ordered UUIDs,
and the savers' primary key ``(thread_id, checkpoint_ns, checkpoint_id)`` serves the grouping);
then only the rows shown are loaded, without building a graph or replaying any history.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from gated_react.records.store import pg_connection, readable
from gated_react.stops import ended_status

METADATA_KEY = "gated_react_run"
"""Checkpoint metadata key of what a CLI run was started with (``cli.run_options.RunOptions``);
LangGraph stores only scalar metadata, so the value is JSON text."""
SERVER_KEY = "langgraph_api_version"
"""Checkpoint metadata key a LangGraph server (``langgraph dev``, the Agent Server) writes in
every run it makes: its version."""

_LATEST = (
    "SELECT thread_id, MAX(checkpoint_id) AS latest FROM checkpoints "
    "WHERE checkpoint_ns = '' GROUP BY thread_id ORDER BY latest DESC LIMIT {param}"
)
_COUNT = "SELECT COUNT(DISTINCT thread_id) AS n FROM checkpoints WHERE checkpoint_ns = ''"
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
    started_by: str
    """``cli``, ``workers`` (the CLI tells them apart by the queue), ``langgraph`` (a LangGraph
    server) or ``program`` (the library): who answers its question (``started_by``)."""
    assistant_id: str | None = None
    """The LangGraph server's assistant that runs the thread (what an answer through the
    LangGraph SDK names); None for the other threads."""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def latest_runs(saver: Any, limit: int) -> tuple[list[RunRow], int]:
    """The ``limit`` most recently updated threads, newest first, and how many there are."""
    ids, total = _latest_ids(saver, limit)
    rows: list[RunRow] = []
    for thread_id, found in _load(saver, ids):
        with readable(thread_id):  # values of the wrong shape: one line naming the thread
            rows.append(_row(thread_id, found))
    return rows, total


def waiting_runs(saver: Any, limit: int) -> list[QuestionRow]:
    """The open questions of up to ``limit`` threads, the longest waiting first."""
    from gated_react.runs import questions

    rows: list[QuestionRow] = []
    for thread_id, found in _load(saver, _waiting_ids(saver, limit)):
        with readable(thread_id):
            values = found.checkpoint.get("channel_values", {})
            asked = [i for write in found.pending_writes or () if _asks(write) for i in write[2]]
            rows.extend(_question(thread_id, found, values, one) for one in questions(asked))
    return rows


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


def _question(thread_id: str, found: Any, values: dict[str, Any], asked: Any) -> QuestionRow:
    asked = asked if isinstance(asked, dict) else {"value": asked}
    step = asked.get("step")
    metadata = found.metadata or {}
    assistant = metadata.get("assistant_id")
    return QuestionRow(
        thread_id=thread_id,
        question=str(asked.get("id", "")),
        tool=None if asked.get("tool") is None else str(asked["tool"]),
        args=asked.get("args"),
        kind=None if asked.get("kind") is None else str(asked["kind"]),
        step=step if isinstance(step, int) else None,
        since=_local(found.checkpoint.get("ts", "")),
        goal=str(values.get("goal", "")),
        started_by=started_by(metadata),
        assistant_id=str(assistant) if assistant and started_by(metadata) == "langgraph" else None,
    )


def started_by(metadata: Mapping[str, Any] | None) -> str:
    """Who started a thread's run, from its checkpoint's metadata: ``cli`` (what it was started
    with is recorded, ``METADATA_KEY``), ``langgraph`` (a LangGraph server, ``SERVER_KEY``),
    else ``program``: the library, or the workers (only the queue tells those apart)."""
    if started_with(metadata) is not None:
        return "cli"
    return "langgraph" if (metadata or {}).get(SERVER_KEY) else "program"


def _asks(write: Any) -> bool:
    """A write of questions; one that holds anything but interrupts is damage, not silence."""
    if write[1] != "__interrupt__":
        return False
    if not isinstance(write[2], list | tuple):
        raise TypeError(f"its open question decodes to {type(write[2]).__name__}")
    return True


def _load(saver: Any, ids: list[tuple[str, str]]) -> Iterator[tuple[str, Any]]:
    """The stored checkpoint of each ``(thread, checkpoint id)``, skipping vanished ones."""
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
            yield thread_id, found


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
    ids, _ = _scan(saver, None)  # any other saver (the in-memory one): check each thread
    waiting = [(thread, found) for thread, found in _load(saver, ids) if _open(found)]
    return [(t, f.config["configurable"]["checkpoint_id"]) for t, f in waiting[::-1][:limit]]


def _open(found: Any) -> bool:
    """The checkpoint holds a question that no answer has reached yet."""
    channels = {write[1] for write in found.pending_writes or ()}
    return "__interrupt__" in channels and "__resume__" not in channels


def _latest_ids(saver: Any, limit: int) -> tuple[list[tuple[str, str]], int]:
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        with saver.lock:
            rows = conn.execute(_LATEST.format(param="?"), (limit,)).fetchall()
            total = conn.execute(_COUNT).fetchone()[0]
        return [(r[0], r[1]) for r in rows], int(total)
    pg_conn = pg_connection(saver)
    if pg_conn is not None:
        with saver.lock, pg_conn as pg, pg.cursor() as cur:
            cur.execute(_LATEST.format(param="%s"), (limit,))
            rows = cur.fetchall()
            cur.execute(_COUNT)
            total = cur.fetchone()["n"]
        return [(r["thread_id"], r["latest"]) for r in rows], int(total)
    return _scan(saver, limit)


def _scan(saver: Any, limit: int | None) -> tuple[list[tuple[str, str]], int]:
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
    status = ended_status(values) or ("paused" if waiting else "unfinished")
    options = started_with(found.metadata) or {}
    return RunRow(
        thread_id=thread_id,
        status=status,
        stop_reason=values.get("stop_reason"),
        steps=int(usage.get("steps", 0)),
        tokens=int(usage.get("tokens", 0)),
        cost=cost if isinstance(cost := usage.get("cost"), int | float) else None,
        updated=_local(found.checkpoint.get("ts", "")),
        goal=str(values.get("goal", "")),
        model=model if isinstance(model := options.get("model"), str) else None,
    )


def started_with(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the run was started with, as recorded under ``METADATA_KEY``; None when it was
    not recorded (a run started by the library) or the record is damaged."""
    raw = (metadata or {}).get(METADATA_KEY)
    try:
        found = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _local(ts: str) -> str:
    try:
        return datetime.fromisoformat(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return ts
