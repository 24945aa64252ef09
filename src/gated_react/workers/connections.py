"""A worker's connections to the store, and which failures are the store's.

Runs share a pool whose connections are checked before each use, so a restarted or terminated
server costs a reconnect, not the worker. Each run holds one pooled connection for its whole
job: its thread lock (a session advisory lock) and its checkpoint writes share that session, so
a lost connection takes the lock and every later write with it. A run can then never go on
writing after another worker took its thread over; it fails, and the job is retried.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from gated_react.errors import StoreError, causes
from gated_react.runs import Graph
from gated_react.store.checkpointer import StoreURL, aopen_checkpointer
from gated_react.store.coalesced import CoalescedPostgresSaver
from gated_react.store.damage import DECODING
from gated_react.store.key import TAG, KeyInput, row_signer, store_key, where_of
from gated_react.store.postgres import pg_kwargs
from gated_react.store.serializer import SignatureRefused, UnsafeCheckpoint, serializer
from gated_react.store.signed import key_of, signed, unwrapped

POOL_TIMEOUT = 30.0
"""Seconds a run waits for a connection before its job fails (and is retried)."""

_LOST = (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout, StoreError, ConnectionError)


def store_lost(exc: BaseException) -> bool:
    """The failure is the infrastructure's (connection lost, server unreachable), not the run's;
    procrastinate's ``ConnectorException`` carries the psycopg error as its cause."""
    return any(isinstance(seen, _LOST) for seen in causes(exc))


@asynccontextmanager
async def open_pool(url: str, size: int) -> AsyncIterator[AsyncConnectionPool[Any]]:
    """The runs' pool: one connection per run at once, plus one for reads; each checked before
    it is handed out. Opening does not wait for the server, so a worker starts while it is down."""
    store = StoreURL.parse(url)
    async with aopen_checkpointer(url):  # the saver's tables, created once (setup lock)
        pass
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        store.target,
        kwargs=pg_kwargs(),
        min_size=1,
        max_size=size + 1,
        timeout=POOL_TIMEOUT,
        check=AsyncConnectionPool.check_connection,
        open=False,
        name="gated-react-runs",
    )
    await pool.open(wait=False)
    try:
        yield pool
    finally:
        await pool.close()


def pool_saver(pool: AsyncConnectionPool[Any], key: KeyInput = ()) -> BaseCheckpointSaver[Any]:
    """The saver the graph factory builds the graph with, signed with ``key`` if one is given
    (``GATED_REACT_STORE_KEY``); jobs run on a copy bound to one connection
    (``on_one_connection``)."""
    try:
        keys = store_key(key)
    except ValueError as exc:
        raise StoreError(str(exc)) from None
    serde = serializer(keyed=keys is not None)
    return signed(AsyncPostgresSaver(pool, serde=serde), keys)


@asynccontextmanager
async def on_one_connection(graph: Graph, pool: AsyncConnectionPool[Any]) -> AsyncIterator[Graph]:
    """The graph, its checkpointer bound to one pooled connection held until the block ends,
    committing the checkpoints of supersteps that run no tool together (``store.coalesced``):
    what a run still holds is committed before its thread lock is released, and what a failed
    run held is dropped, as a killed worker's is."""
    base = graph.checkpointer
    async with pool.connection() as conn:
        serde = getattr(base, "serde", None) or serializer(keyed=key_of(base) is not None)
        raw = CoalescedPostgresSaver(conn, serde=serde)
        saver = signed(raw, key_of(base))  # the graph's key: what it signs, its jobs sign
        yield graph.copy(update={"checkpointer": saver})


KEY_SAMPLE = 20
"""The newest checkpoints a worker checks its key against before it takes a job."""


async def check_key(saver: BaseCheckpointSaver[Any]) -> None:
    """A worker whose key verifies none of the store's newest signed checkpoints could run
    none of its threads: every job it took (a human's answer among them) would be refused.
    ``ValueError`` (exit 2, the fleet stops) when the newest ``KEY_SAMPLE`` rows are all
    signed and none with this key; a store with one edited row still starts."""
    key, raw = key_of(saver), unwrapped(saver)
    signed_rows = verified = 0
    try:
        async for found in raw.alist(None, limit=KEY_SAMPLE):
            if found.metadata.get(TAG) is None:
                return  # a row written without a key: this store is not all signed
            signed_rows += 1
            where = where_of(found)
            verified += key is not None and row_signer(
                key, where, found.checkpoint, found.metadata
            ) is not None  # fmt: skip
    except SignatureRefused as exc:  # without a key, its serializer refuses a sealed write
        if exc.kind != "keyed":
            return
        signed_rows = max(signed_rows, 1)
    except (UnsafeCheckpoint, *DECODING):  # an edited or damaged row: its own thread's matter
        return
    if signed_rows and not verified:
        why = "is not set" if key is None else "verifies none of them"
        raise ValueError(
            "this store's newest checkpoints are signed and "
            f"GATED_REACT_STORE_KEY {why}: the worker could run none of their threads; set the "
            "key the store was signed with (during a rotation, the new key then the old)"
        )
