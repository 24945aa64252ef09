"""The latest runs in a store, fast on big stores.

One SQL query finds the newest checkpoint id per thread (checkpoint ids are time-ordered UUIDs,
and the savers' primary key ``(thread_id, checkpoint_ns, checkpoint_id)`` serves the grouping);
then only the rows shown are read (their conversation, which holds the goal, rebuilt from its
last snapshot), and each run's steps, tokens and cost come from its record.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from gated_react.records.store import check_signed, pg_connection, readable

METADATA_KEY = "gated_react_run"
"""Checkpoint metadata key of what a CLI run was started with (``cli.run_options.RunOptions``);
LangGraph stores only scalar metadata, so the value is JSON text."""

_LATEST = (
    "SELECT thread_id, MAX(checkpoint_id) AS latest FROM checkpoints "
    "WHERE checkpoint_ns = '' GROUP BY thread_id ORDER BY latest DESC LIMIT {param}"
)
_COUNT = "SELECT COUNT(DISTINCT thread_id) AS n FROM checkpoints WHERE checkpoint_ns = ''"
# Threads whose latest checkpoint holds an open question (an interrupt not yet answered),
# longest waiting first. ``{writes}``: the savers name the table of pending writes differently.
_WAITING = (
    "SELECT c.thread_id, c.latest FROM (SELECT thread_id, MAX(checkpoint_id) AS latest"
    " FROM checkpoints WHERE checkpoint_ns = '' GROUP BY thread_id) AS c"
    " WHERE EXISTS (SELECT 1 FROM {writes} AS w WHERE w.thread_id = c.thread_id"
    " AND w.checkpoint_ns = '' AND w.checkpoint_id = c.latest AND w.channel = '__interrupt__')"
    " AND NOT EXISTS (SELECT 1 FROM {writes} AS w WHERE w.thread_id = c.thread_id"
    " AND w.checkpoint_ns = '' AND w.checkpoint_id = c.latest AND w.channel = '__resume__')"
    " ORDER BY c.latest LIMIT {param}"
)


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

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def latest_runs(saver: Any, limit: int) -> tuple[list[RunRow], int]:
    """The ``limit`` most recently updated threads, newest first, and how many there are."""
    ids, total = _latest_ids(saver, limit)
    rows = [_row(thread_id, found) for thread_id, found in _load(saver, ids)]
    return rows, total


def waiting_runs(saver: Any, limit: int) -> list[QuestionRow]:
    """The open questions of up to ``limit`` threads, the longest waiting first."""
    rows: list[QuestionRow] = []
    for thread_id, found in _load(saver, _waiting_ids(saver, limit)):
        with readable(thread_id):
            since, goal = _local(found.snapshot.created_at or ""), goal_of(found.result)
            rows.extend(_question(thread_id, one, since, goal) for one in found.result["pending"])
    return rows


def goal_of(result: Mapping[str, Any]) -> str:
    """The goal of a thread's latest run: the text of its last human message."""
    for message in reversed(result.get("messages") or ()):
        if getattr(message, "type", None) == "human":
            text = message.text
            return text if isinstance(text, str) else str(text)
    return ""


def _question(thread_id: str, asked: Any, since: str, goal: str) -> QuestionRow:
    asked = asked if isinstance(asked, dict) else {"value": asked}
    step = asked.get("step")
    return QuestionRow(
        thread_id=thread_id,
        question=str(asked.get("id", "")),
        tool=None if asked.get("tool") is None else str(asked["tool"]),
        args=asked.get("args"),
        kind=None if asked.get("kind") is None else str(asked["kind"]),
        step=step if isinstance(step, int) else None,
        since=since,
        goal=goal,
    )


@dataclass(frozen=True, slots=True)
class _Found:
    """A thread as stored at one checkpoint: LangGraph's snapshot and the result it makes."""

    snapshot: Any
    result: Any


def _load(saver: Any, ids: list[tuple[str, str]]) -> Iterator[tuple[str, _Found]]:
    """The state at each ``(thread, checkpoint id)``, skipping vanished ones; a thread this
    version cannot read is one line naming it (signed with a key this store was opened
    without, or damaged)."""
    if not ids:
        return  # nothing to read: the graph's stack is not even loaded
    from gated_react.graph import idle_graph
    from gated_react.runs import from_snapshot, run_book

    reader = idle_graph(saver)
    for thread_id, checkpoint_id in ids:
        config = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": "",
                "checkpoint_id": checkpoint_id,
            }
        }
        with readable(thread_id):
            try:
                snapshot = reader.get_state(config)  # type: ignore[arg-type]
            except Exception:
                stored = saver.get_tuple(config)
                check_signed(saver, thread_id, stored.metadata if stored else None)
                raise
        if snapshot.values:
            result = from_snapshot(snapshot, thread_id, run_book(saver, thread_id))
            yield thread_id, _Found(snapshot, result)


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
    waiting = [(thread, cid) for thread, cid in ids if _open(_stored(saver, thread, cid))]
    return waiting[::-1][:limit]


def _stored(saver: Any, thread_id: str, checkpoint_id: str) -> Any:
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id":
                               checkpoint_id}}  # fmt: skip
    return saver.get_tuple(config)


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


def _row(thread_id: str, found: _Found) -> RunRow:
    result, usage = found.result, found.result["usage"]
    status = result["status"] or "unfinished"
    options = started_with(found.snapshot.metadata) or {}
    return RunRow(
        thread_id=thread_id,
        status=status,
        stop_reason=result["stop_reason"],
        steps=int(usage.get("steps", 0)),
        tokens=int(usage.get("tokens", 0)),
        cost=cost if isinstance(cost := usage.get("cost"), int | float) else None,
        updated=_local(found.snapshot.created_at or ""),
        goal=goal_of(result),
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
