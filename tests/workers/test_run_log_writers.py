"""A worker's jobs write their run logs' lines into the store in one statement per batch: the
lines of every job, in order, each job's end after its own lines, and a failing store costs
lines, never a job (nor a job's end that waits for ever)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psycopg
import pytest
from procrastinate import PsycopgConnector

from gated_react.records.run_log import STORE_INSERT, STORE_SCHEMA
from gated_react.workers.run_log_writers import StoreLines, StoreWriter


class _Connector:
    """A connector that records each statement and holds it until ``release`` is set."""

    def __init__(self, fail: int = 0) -> None:
        self.fail = fail
        """Statements that fail, the first ones."""
        self.batches: list[list[tuple[str, str]]] = []
        self.release = asyncio.Event()
        self.steps: asyncio.Semaphore | None = None
        """When set, each statement past ``release`` also takes a step from it."""

    async def execute_query_async(self, query: str, **params: Any) -> None:
        assert query == STORE_INSERT
        await self.release.wait()
        if self.steps is not None:
            await self.steps.acquire()
        if self.fail:
            self.fail -= 1
            raise OSError("connection refused")
        self.batches.append(list(zip(params["threads"], params["lines"], strict=True)))


def _event(n: int) -> dict[str, Any]:
    return {"node": "decide", "step": n}


def test_lines_of_many_jobs_share_a_statement_and_keep_their_order() -> None:
    async def scenario() -> tuple[_Connector, list[bool]]:
        connector = _Connector()
        lines = StoreLines(connector)
        writers = [StoreWriter(lines, f"t{n}", ()) for n in range(3)]
        writers[0].write(_event(0))
        await asyncio.sleep(0)  # the first batch takes this line alone; the store holds it
        for step in range(1, 5):
            for writer in writers:
                writer.write(_event(step))
        ended = [False] * 3

        async def end(n: int) -> None:
            await writers[n].aclose()
            ended[n] = True

        ends = [asyncio.ensure_future(end(n)) for n in range(3)]
        await asyncio.sleep(0.01)
        assert ended == [False] * 3  # nothing written yet: no job's end may pass
        connector.release.set()
        await asyncio.gather(*ends)
        return connector, ended

    connector, ended = asyncio.run(scenario())
    assert ended == [True] * 3
    assert [len(batch) for batch in connector.batches] == [1, 12]
    written = [
        (thread, json.loads(line)["step"]) for batch in connector.batches for thread, line in batch
    ]
    for n in range(3):
        steps = [step for thread, step in written if thread == f"t{n}"]
        assert steps == ([0] if n == 0 else []) + [1, 2, 3, 4]


def test_a_failing_store_costs_the_lines_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    async def scenario() -> _Connector:
        connector = _Connector(fail=1)
        connector.release.set()
        lines = StoreLines(connector)
        writer = StoreWriter(lines, "order-7", ("sk-secret-key",))
        writer.write(_event(1))
        writer.write(_event(2))
        await asyncio.wait_for(writer.aclose(), 5)
        later = StoreWriter(lines, "order-8", ())  # the store is back: the next lines go in
        later.write(_event(3))
        await asyncio.wait_for(later.aclose(), 5)
        return connector

    connector = asyncio.run(scenario())
    err = capsys.readouterr().err
    assert "2 run-log lines of 'order-7' not stored: connection refused" in err
    assert [[thread for thread, _ in batch] for batch in connector.batches] == [["order-8"]]


def test_a_cancelled_writer_leaves_no_job_waiting() -> None:
    async def scenario() -> None:
        connector = _Connector()  # never released: the batch hangs until cancelled
        lines = StoreLines(connector)
        writer = StoreWriter(lines, "t", ())
        writer.write(_event(1))
        waiting = asyncio.ensure_future(writer.aclose())
        await asyncio.sleep(0.01)
        assert not waiting.done()
        assert lines._task is not None
        lines._task.cancel()
        await asyncio.wait_for(waiting, 5)

    asyncio.run(scenario())


def test_after_a_cancelled_batch_a_job_waits_for_its_own_lines_only() -> None:
    async def scenario() -> None:
        connector = _Connector()
        lines = StoreLines(connector)
        StoreWriter(lines, "gone", ()).write(_event(1))
        await asyncio.sleep(0)
        assert lines._task is not None
        lines._task.cancel()  # the batch of "gone" is given up with the task
        await asyncio.sleep(0)
        first, later = StoreWriter(lines, "first", ()), StoreWriter(lines, "later", ())
        first.write(_event(1))
        await asyncio.sleep(0)  # its batch is held by the store
        later.write(_event(2))  # queued behind it, for the next batch
        connector.steps = asyncio.Semaphore(1)  # the held batch goes; the next waits for a step
        connector.release.set()
        await asyncio.wait_for(first.aclose(), 5)
        assert [thread for batch in connector.batches for thread, _ in batch] == ["first"]
        connector.steps.release()
        await asyncio.wait_for(later.aclose(), 5)

    asyncio.run(scenario())


def test_a_job_that_wrote_nothing_ends_at_once() -> None:
    async def scenario() -> None:
        await asyncio.wait_for(StoreWriter(StoreLines(_Connector()), "t", ()).aclose(), 5)

    asyncio.run(scenario())


@pytest.mark.postgres
def test_the_store_holds_each_threads_lines_in_order(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(STORE_SCHEMA)

    async def scenario() -> None:
        connector = PsycopgConnector(conninfo=pg_url)
        await connector.open_async()
        try:
            lines = StoreLines(connector)
            writers = [StoreWriter(lines, f"t{n}", ()) for n in range(4)]
            for step in range(25):
                for writer in writers:
                    writer.write(_event(step))
                await asyncio.sleep(0)
            await asyncio.gather(*(writer.aclose() for writer in writers))
        finally:
            await connector.close_async()

    asyncio.run(scenario())
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT thread_id, line FROM gated_react_run_log ORDER BY id"
        ).fetchall()
    assert len(rows) == 100
    for n in range(4):
        steps = [json.loads(line)["step"] for thread, line in rows if thread == f"t{n}"]
        assert steps == list(range(25))


def test_a_worker_back_after_a_lost_store_writes_with_its_new_connector() -> None:
    """Each life of the worker loop opens an app of its own (the last one's is closed): jobs of
    one life share one writer, and the next life's jobs get a writer on the new connector."""
    from types import SimpleNamespace

    from gated_react.workers.health import Health
    from gated_react.workers.watch import Watch

    def job(connector: _Connector) -> Any:
        return SimpleNamespace(app=SimpleNamespace(connector=connector))

    watch = Watch("worker-0", Health("worker-0", stalled_after=30.0))
    before, after = _Connector(), _Connector()
    first, second = watch._writer(job(before), "a"), watch._writer(job(before), "b")
    assert isinstance(first, StoreWriter)
    assert isinstance(second, StoreWriter)
    assert first.lines is second.lines
    assert first.lines.connector is before
    later = watch._writer(job(after), "c")
    assert isinstance(later, StoreWriter)
    assert later.lines.connector is after
