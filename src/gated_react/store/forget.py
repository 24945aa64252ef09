"""A thread's run records deleted with its checkpoints: LangGraph's ``delete_thread`` (Studio's
``threads.delete``, a server's ``prune``) on the savers ``open_checkpointer`` and
``aopen_checkpointer`` hand out.

LangGraph's own ``delete_thread`` removes a thread's checkpoints and writes, not the records
kept beside them (``RECORDS``): the thread's runs would still count toward its limits when it is
begun again under its id, and a run that takes a deleted run's id (the same question at the same
place) toward that run's budgets. The savers here delete the records after the checkpoints, in
a transaction of their own: a failure between the two leaves records without checkpoints (the
thread's runs still counted, as before), never checkpoints without the records that say which
calls ran. A process that read the thread reads it anew as its next run opens
(``Ledger.renew``); a SQLite saver's own tail is dropped (``changed_outside``).

One program for every saver (``forgetting``): the statements, each sent the rows the one
before read; a sync or async driver runs it on the saver's own connection and lock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from typing import Any

from gated_react.store.rows import RECORDS, owned, parts_of

Query = tuple[str, Sequence[Any]]
Rows = list[tuple[Any, ...]]
Program = Generator[Query, Rows, None]


def forgetting(mark: str, thread: str) -> Program:
    """Delete ``thread``'s records and its subgraphs' (``rows.record_thread``), never another
    thread's; ``mark``: the driver's parameter mark (``?`` or ``%s``)."""
    table = (
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?"
        if mark == "?"
        else "SELECT 1 WHERE to_regclass(%s) IS NOT NULL"
    )
    if not (yield table, (RECORDS,)):
        return  # a store no run wrote to yet
    clause, params = parts_of([thread], mark)
    found = yield f"SELECT DISTINCT thread_id FROM {RECORDS} WHERE {clause}", params
    mine = list(owned((str(row[0]) for row in found), {thread}))
    if mine:
        yield f"DELETE FROM {RECORDS} WHERE thread_id IN {_marks(mark, mine)}", mine


def _marks(mark: str, values: Sequence[Any]) -> str:
    return f"({', '.join([mark] * len(values))})"


def run(program: Program, execute: Callable[[str, Sequence[Any]], Rows]) -> None:
    """``program`` run with a sync ``execute``."""
    try:
        query = next(program)
        while True:
            query = program.send(execute(*query))
    except StopIteration:
        return


async def arun(program: Program, execute: Callable[[str, Sequence[Any]], Awaitable[Rows]]) -> None:
    """``program`` run with an async ``execute``."""
    try:
        query = next(program)
        while True:
            query = program.send(await execute(*query))
    except StopIteration:
        return


def tuples(rows: Iterable[Any]) -> Rows:
    """Rows as tuples (LangGraph's Postgres savers' cursors make dicts)."""
    return [tuple(row.values()) if isinstance(row, dict) else tuple(row) for row in rows]
