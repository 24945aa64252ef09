"""The async savers ``aopen_checkpointer`` hands out: LangGraph's own, with what the LangGraph
server asks of a custom checkpointer (``langgraph dev`` warns when one is missing).

``adelete_for_runs``: the checkpoints and writes of the given runs go (``multitask_strategy=
"rollback"`` removes a cancelled run this way). A rolled-back run's checkpoints are the newest
of its thread, so no checkpoint left behind replays writes from them.

``delete_thread``: the thread's run records go too, after its checkpoints (``forget``), the
thread held with its lock as ``gated-react delete`` holds it: one a run is advancing is left
whole (``ThreadBusy``).

``aprune``: ``"delete"`` (the server's ``"delete_all"`` too) removes the threads. ``"keep_latest"``
is refused, as LangGraph's own Postgres saver refuses it for such threads: ``messages`` is a
delta channel, whose latest value is rebuilt from the writes of earlier checkpoints, so keeping
only the latest checkpoint would lose the conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from gated_react.store import forget
from gated_react.store.locks import athread_lock, thread_lock
from gated_react.store.rows import changed_outside

DELETE = frozenset({"delete", "delete_all"})
KEEP_LATEST = (
    "keep_latest pruning is not supported: a gated-react thread's messages are a delta channel, "
    "rebuilt from every earlier checkpoint's writes; delete the thread instead"
)


def strategy_deletes(strategy: str) -> bool:
    """True for a strategy that removes the threads; raises for any other."""
    if strategy in DELETE:
        return True
    if strategy == "keep_latest":
        raise NotImplementedError(KEEP_LATEST)
    raise ValueError(f"unknown prune strategy {strategy!r} (use 'delete')")


class _RollingBack:
    """``AsyncSqliteSaver``'s lock, released only once the connection is out of a transaction.
    The saver's writes run in ``sqlite3``'s implicit transaction and commit at the end; one
    refused by a busy database, or cancelled, raised before its commit and left it open: the
    connection then read an old snapshot and failed its next write at once ("database is
    locked"). What an exception leaves is rolled back, after the statement under way (on
    ``aiosqlite``'s thread), before anyone else uses the connection."""

    def __init__(self, saver: AsyncSqliteSaver) -> None:
        self._saver, self._lock = saver, asyncio.Lock()

    def locked(self) -> bool:
        return self._lock.locked()

    async def __aenter__(self) -> None:
        await self._lock.acquire()

    async def __aexit__(self, kind: Any, error: Any, trace: Any) -> None:
        try:
            if kind is not None:
                with contextlib.suppress(Exception):  # a connection closed meanwhile
                    await asyncio.shield(self._saver.conn.rollback())
        finally:
            self._lock.release()


class SyncSqliteStore(SqliteSaver):
    """``SqliteSaver`` whose ``delete_thread`` deletes the thread's run records too."""

    def delete_thread(self, thread_id: str) -> None:
        with thread_lock(self, str(thread_id)):  # a run advancing it: ThreadBusy, nothing goes
            super().delete_thread(thread_id)
            conn = self.conn
            with self.lock:
                changed_outside()  # what the ledger's backend kept of its rows is read again
                try:
                    program = forget.forgetting("?", str(thread_id))
                    forget.run(program, lambda q, a: _rows(conn, q, a))
                except BaseException:
                    conn.rollback()
                    raise
                conn.commit()


def _rows(conn: Any, query: str, args: Sequence[Any]) -> forget.Rows:
    return forget.tuples(conn.execute(query, args).fetchall())


class SqliteStore(AsyncSqliteSaver):
    """``AsyncSqliteSaver`` with ``adelete_for_runs`` and ``aprune``, a ``delete_thread`` that
    deletes the thread's run records too, and a lock that leaves no failed write's transaction
    open (``_RollingBack``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lock = _RollingBack(self)  # type: ignore[assignment]

    async def adelete_thread(self, thread_id: str) -> None:
        conn = self.conn

        async def rows(query: str, args: Sequence[Any]) -> forget.Rows:
            async with conn.execute(query, args) as cur:
                return forget.tuples(await cur.fetchall())

        async with athread_lock(self, str(thread_id)):
            await super().adelete_thread(thread_id)
            async with self.lock:  # rolls back what an exception leaves
                changed_outside()
                await forget.arun(forget.forgetting("?", str(thread_id)), rows)
                await conn.commit()

    async def adelete_for_runs(self, run_ids: Iterable[str]) -> None:
        """Delete the checkpoints (and their writes) that the given runs wrote."""
        runs = [str(run) for run in run_ids]
        if not runs:
            return
        marks = ",".join("?" * len(runs))
        chosen = (
            "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints "
            f"WHERE json_extract(CAST(metadata AS TEXT), '$.run_id') IN ({marks})"
        )
        async with self.lock:
            await self.conn.execute(
                f"DELETE FROM writes WHERE (thread_id, checkpoint_ns, checkpoint_id) IN ({chosen})",
                runs,
            )
            await self.conn.execute(
                "DELETE FROM checkpoints WHERE "
                f"json_extract(CAST(metadata AS TEXT), '$.run_id') IN ({marks})",
                runs,
            )
            await self.conn.commit()

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Delete the threads (``strategy="delete"``); see the module for ``keep_latest``."""
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread ids, not a str")
        if strategy_deletes(strategy):
            for thread_id in thread_ids:
                await self.adelete_thread(str(thread_id))


@cache
def sync_postgres_store() -> type:
    """``PostgresSaver`` whose ``delete_thread`` deletes the thread's run records too."""
    from langgraph.checkpoint.postgres import PostgresSaver

    class SyncPostgresStore(PostgresSaver):
        def delete_thread(self, thread_id: str) -> None:
            with thread_lock(self, str(thread_id)):
                super().delete_thread(thread_id)
                self._forget(str(thread_id))

        def _forget(self, thread_id: str) -> None:
            with self._cursor() as cur, cur.connection.transaction():

                def rows(query: str, args: Sequence[Any]) -> forget.Rows:
                    cur.execute(query, args)
                    return forget.tuples(cur.fetchall() if cur.description else [])

                forget.run(forget.forgetting("%s", thread_id), rows)

    return SyncPostgresStore


@cache
def postgres_store() -> type:
    """``AsyncPostgresSaver`` with ``adelete_for_runs`` (its own ``aprune`` refuses
    ``keep_latest`` for delta channels already) and a ``delete_thread`` that deletes the
    thread's run records too; imported only when Postgres is used."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    class PostgresStore(AsyncPostgresSaver):
        async def adelete_thread(self, thread_id: str) -> None:
            async with athread_lock(self, str(thread_id)):
                await super().adelete_thread(thread_id)
                await self._aforget(str(thread_id))

        async def _aforget(self, thread_id: str) -> None:
            async with self._cursor() as cur, cur.connection.transaction():

                async def rows(query: str, args: Sequence[Any]) -> forget.Rows:
                    await cur.execute(query, args)
                    return forget.tuples(await cur.fetchall() if cur.description else [])

                await forget.arun(forget.forgetting("%s", thread_id), rows)

        async def adelete_for_runs(self, run_ids: Iterable[str]) -> None:
            runs = [str(run) for run in run_ids]
            if not runs:
                return
            chosen = (
                "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints "
                "WHERE metadata->>'run_id' = ANY(%s)"
            )
            async with self._cursor() as cur, cur.connection.transaction():
                await cur.execute(
                    "DELETE FROM checkpoint_writes WHERE "
                    f"(thread_id, checkpoint_ns, checkpoint_id) IN ({chosen})",
                    (runs,),
                )
                await cur.execute(
                    "DELETE FROM checkpoints WHERE metadata->>'run_id' = ANY(%s)", (runs,)
                )

        async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
            deleting = strategy_deletes(strategy)  # the server's "delete_all" is "delete"
            await super().aprune(thread_ids, strategy="delete" if deleting else strategy)

    return PostgresStore
