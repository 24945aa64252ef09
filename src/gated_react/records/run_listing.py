"""The latest runs in a store, fast on big stores, by status and age.

One SQL query finds the newest checkpoint id per thread (checkpoint ids are time-ordered UUIDs,
and the savers' primary key ``(thread_id, checkpoint_ns, checkpoint_id)`` serves the grouping);
then only the rows shown are read (their conversation, which holds the goal, rebuilt from its
last snapshot), and each run's steps, tokens and cost come from its record.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from gated_react.records import RecordError
from gated_react.records.store import pg_connection, readable
from gated_react.records.windows import Window, id_time
from gated_react.store.serializer import SignatureRefused

METADATA_KEY = "gated_react_run"
"""Checkpoint metadata key of what a CLI run was started with (``cli.run_options.RunOptions``);
LangGraph stores only scalar metadata, so the value is JSON text."""
SERVER_KEY = "langgraph_api_version"
"""Checkpoint metadata key a LangGraph server (``langgraph dev``, the Agent Server) writes in
every run it makes: its version."""

_LATEST = (
    "SELECT thread_id, MAX(checkpoint_id) AS latest FROM checkpoints"
    " WHERE checkpoint_ns = '' GROUP BY thread_id{having} ORDER BY latest DESC, thread_id{page}"
)
_COUNT = (
    "SELECT COUNT(*) AS n FROM (SELECT thread_id FROM checkpoints"
    " WHERE checkpoint_ns = '' GROUP BY thread_id{having}) AS threads"
)
_ALWAYS = Window()
_PAGE = 200  # threads loaded at a time while a status filter skips some

STATUSES = (
    "ok", "stopped", "paused", "running", "unfinished",
    "unsigned", "unverified", "keyed", "damaged",
)  # fmt: skip
"""A run's status as the listings show it: ``running`` while another process advances it,
``unfinished`` when none does (it crashed or was killed: ``resume`` continues it); the last
four: it could not be read (its signature refused it, or its rows are damaged), and
``problem`` says what to do."""
REFUSED = {
    "damaged": "its rows cannot be read (edited, damaged, or written by another program or"
    " version): `gated-react show` it for the reason; delete it, or restore the store",
    "unsigned": "written without the store key: `gated-react sign --unsigned` signs it, once you"
    " trust the store as it is",
    "unverified": "signed, but no key in GATED_REACT_STORE_KEY verifies it (another key signed"
    " it, or it was edited): give that key, or delete the thread",
    "keyed": "signed with a store key: set GATED_REACT_STORE_KEY to read it",
}


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
    problem: str | None = None
    """Why the thread was not read (status ``unsigned``, ``unverified``, ``keyed``,
    ``damaged``)."""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def latest_runs(
    saver: Any, limit: int | None, *, window: Window = _ALWAYS, statuses: Collection[str] = ()
) -> tuple[list[RunRow], int]:
    """The ``limit`` (None: all) most recently updated threads in ``window`` with one of
    ``statuses`` (any if none), newest first, and how many threads the window holds. Only the
    rows looked at are loaded: all of them when ``statuses`` skips some."""
    wanted = frozenset(statuses)
    page = limit if not wanted else _PAGE
    rows: list[RunRow] = []
    offset, total, reader = 0, None, Reader(saver)
    while limit is None or len(rows) < limit:
        ids, counted = _latest_ids(saver, window, page, offset)
        total = counted if total is None else total
        for thread_id, checkpoint_id in ids:
            found = attempt(thread_id, partial(reader.read, thread_id, checkpoint_id))
            row = _unread_row(thread_id, checkpoint_id, found) or _row(thread_id, found)
            if row is not None and row.status == "unfinished" and advancing(saver, thread_id):
                row = replace(row, status="running")
            if row is not None and (not wanted or row.status in wanted):
                rows.append(row)
        if page is None or len(ids) < page:
            break
        offset += page
    return rows[:limit], total or 0


def load(saver: Any, ids: list[tuple[str, str]]) -> Iterator[tuple[str, str, Any]]:
    """The stored checkpoint of each ``(thread, checkpoint id)``, or the ``SignatureRefused``
    that refused it; vanished ones skipped."""
    for thread_id, checkpoint_id in ids:
        config = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": "",
                "checkpoint_id": checkpoint_id,
            }
        }
        found = attempt(thread_id, partial(saver.get_tuple, config))
        if found is not None:
            yield thread_id, checkpoint_id, found


@dataclass(frozen=True, slots=True)
class Found:
    """A thread as stored at one checkpoint: LangGraph's snapshot and the result it makes."""

    snapshot: Any
    result: Any
    goal: str = ""
    model: str | None = None
    """The model the run's record says it runs on (``opened``)."""


class Reader:
    """Reads threads as a run's result (its conversation rebuilt, its counts from its record);
    the graph that reads them is built at the first read."""

    def __init__(self, saver: Any) -> None:
        self._saver: Any = saver
        self._graph: Any = None

    def read(self, thread_id: str, checkpoint_id: str) -> Found | None:
        """The thread at that checkpoint; None when it holds no values."""
        from gated_react.graph import idle_graph
        from gated_react.runs import from_snapshot, run_book

        if self._graph is None:
            self._graph = idle_graph(self._saver)
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "",
                                   "checkpoint_id": checkpoint_id}}  # fmt: skip
        snapshot = self._graph.get_state(config)
        if not snapshot.values:
            return None
        book = run_book(self._saver, thread_id)
        result = from_snapshot(snapshot, thread_id, book)
        model = None if book.tally.opened is None else book.tally.opened.body.get("model")
        goal = goal_of(result)
        if not goal:  # killed in its first decision: the goal is only in its input channel
            stored = self._saver.get_tuple(config)
            goal = goal_of(result, stored.checkpoint.get("channel_values") if stored else None)
        return Found(snapshot, result, goal, model if isinstance(model, str) else None)


def goal_of(result: Mapping[str, Any], values: Mapping[str, Any] | None = None) -> str:
    """The goal of a thread's latest run: the text of its last human message; before its first
    decision made one of it (a run killed in it), the ``goal`` it was given (``values``: the
    thread's stored channels)."""
    for message in reversed(result.get("messages") or ()):
        if getattr(message, "type", None) == "human":
            text = message.text
            return text if isinstance(text, str) else str(text)
    given = (values or {}).get("goal")
    return given if isinstance(given, str) else ""


def _latest_ids(
    saver: Any, window: Window, limit: int | None, offset: int = 0
) -> tuple[list[tuple[str, str]], int]:
    """Up to ``limit`` (None: all) threads in ``window`` from ``offset`` on, newest first, with
    their latest checkpoint ids; and how many threads the window holds."""
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        latest, count, params = _queries(window, limit, offset, "?")
        with saver.lock:
            rows = conn.execute(latest, params).fetchall()
            total = conn.execute(count, params[: _bounds(window)]).fetchone()[0]
        return [(r[0], r[1]) for r in rows], int(total)
    pg_conn = pg_connection(saver)
    if pg_conn is not None:
        latest, count, params = _queries(window, limit, offset, "%s")
        with saver.lock, pg_conn as pg, pg.cursor() as cur:
            cur.execute(latest, params)
            rows = cur.fetchall()
            cur.execute(count, params[: _bounds(window)])
            total = cur.fetchone()["n"]
        return [(r["thread_id"], r["latest"]) for r in rows], int(total)
    ids, total = scan(saver, None, window)
    return ids[offset:][:limit], total


def _queries(
    window: Window, limit: int | None, offset: int, mark: str
) -> tuple[str, str, list[Any]]:
    """The listing's and the count's SQL, and their parameters (the count takes the window's)."""
    low, high = window.bounds()
    having = [f"MAX(checkpoint_id) >= {mark}"] * (low is not None)
    having += [f"MAX(checkpoint_id) < {mark}"] * (high is not None)
    params: list[Any] = [bound for bound in (low, high) if bound is not None]
    clause = f" HAVING {' AND '.join(having)}" if having else ""
    page = "" if limit is None else f" LIMIT {mark} OFFSET {mark}"
    params += [] if limit is None else [limit, offset]
    return _LATEST.format(having=clause, page=page), _COUNT.format(having=clause), params


def _bounds(window: Window) -> int:
    return sum(bound is not None for bound in window.bounds())


def scan(
    saver: Any, limit: int | None, window: Window = _ALWAYS
) -> tuple[list[tuple[str, str]], int]:
    """Any other saver (the in-memory one): walk every checkpoint."""
    latest: dict[str, str] = {}
    for item in saver.list(None):
        conf = item.config["configurable"]
        if conf.get("checkpoint_ns", "") == "":
            thread, checkpoint = conf["thread_id"], conf["checkpoint_id"]
            latest[thread] = max(latest.get(thread, ""), checkpoint)
    held = [(t, c) for t, c in latest.items() if window.holds(c)]
    ordered = sorted(held, key=lambda kv: kv[1], reverse=True)
    return ordered[:limit], len(held)


def advancing(saver: Any, thread_id: str) -> bool:
    """Another process advances the thread right now: its thread lock is held (read without
    taking it; a store whose locks cannot be read, read-only say, is not known to be)."""
    from gated_react.store.locks import held

    try:
        return held(saver, thread_id)
    except OSError:
        return False


T = TypeVar("T")


def attempt(thread_id: str, read: Callable[[], T]) -> T | SignatureRefused | RecordError:
    """``read()`` of ``thread_id``, or why it was not read, to be listed so and the listing
    to go on: its signature refused it, or its rows are damaged (``readable``'s one line)."""
    try:
        with readable(thread_id):
            try:
                return read()
            except SignatureRefused as refused:
                return refused
    except RecordError as damage:
        return damage


def unread(found: Any) -> str | None:
    """The status of a thread that was not read (``SignatureRefused``'s kind, or ``damaged``
    for a ``RecordError``), None for one that was."""
    if isinstance(found, SignatureRefused):
        return found.kind
    return "damaged" if isinstance(found, RecordError) else None


def _unread_row(thread_id: str, checkpoint_id: str, found: Any) -> RunRow | None:
    """A thread its signature or its damage kept from being read, as such."""
    status = unread(found)
    if status is None:
        return None
    updated = local_id(checkpoint_id)
    return RunRow(thread_id, status, None, 0, 0, None, updated, "", None, REFUSED[status])


def _row(thread_id: str, found: Any) -> RunRow | None:
    if not isinstance(found, Found):
        return None
    result, usage = found.result, found.result["usage"]
    options = started_with(found.snapshot.metadata) or {}
    return RunRow(
        thread_id=thread_id,
        status=result["status"] or "unfinished",
        stop_reason=result["stop_reason"],
        steps=int(usage.get("steps", 0)),
        tokens=int(usage.get("tokens", 0)),
        cost=cost if isinstance(cost := usage.get("cost"), int | float) else None,
        updated=local(found.snapshot.created_at or ""),
        goal=found.goal,
        model=found.model or (model if isinstance(model := options.get("model"), str) else None),
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


def started_by(metadata: Mapping[str, Any] | None) -> str:
    """Who started a thread's run, from its checkpoint's metadata: ``cli`` (what it was started
    with is recorded, ``METADATA_KEY``), ``langgraph`` (a LangGraph server, ``SERVER_KEY``),
    else ``program``: the library, or the workers (only the queue tells those apart)."""
    if started_with(metadata) is not None:
        return "cli"
    return "langgraph" if (metadata or {}).get(SERVER_KEY) else "program"


def local_id(checkpoint_id: str) -> str:
    """When a checkpoint was made, from its id (the row itself was not read)."""
    made = id_time(checkpoint_id)
    return "" if made is None else local(made.isoformat())


def local(ts: str) -> str:
    try:
        return datetime.fromisoformat(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return ts
