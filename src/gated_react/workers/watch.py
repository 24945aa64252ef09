"""What a worker records of each job: a log line at its start and end (``worker_log``), its
counters (``worker_health``), and the run log of the run it advances, in the format every host
reads (``records.run_log``), so ``gated-react show`` has it.

The run log goes into the store (table ``gated_react_run_log``, one row per line), or into
``runs.log`` in the folder the operator names (``--run-log-dir``); ``run_log_writers`` writes
them, the store's in batches for all of a worker's jobs, so a node never waits on them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import logging
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import procrastinate

from gated_react.errors import exception_line
from gated_react.records.events import Tracker, Uncounted
from gated_react.records.run_log import FILE_NAME, RunLog
from gated_react.runs import Graph
from gated_react.state import ThreadResult
from gated_react.workers import heartbeat
from gated_react.workers import log as worker_log
from gated_react.workers.connections import store_lost
from gated_react.workers.health import Health
from gated_react.workers.run_log_writers import FileWriter, StoreLines, StoreWriter, Writer

_WORKER_ID = "SELECT worker_id FROM procrastinate_jobs WHERE id = %(job)s"


class Job:
    """One job as it goes: pass ``on_update`` to the run, and its result to ``done``.

    A run-log line carries the run's counters from its record, which an async saver reads
    with ``await``: each update is described at once, then counted and written in order by a
    chain of tasks (``settled`` waits for the last)."""

    def __init__(self, thread: str, writer: Writer, secrets: tuple[str, ...]) -> None:
        self.tracker = Tracker(thread, secrets=secrets)
        self.writer = writer
        self.saver: Any = None
        """The run's checkpointer (its record holds the counters), once the job has one."""
        self.result: ThreadResult | None = None
        self.before: ThreadResult | None = None
        """The thread as the job found it (None: a new thread), to count what the job spent."""
        self.refused: str | None = None
        """Why the job's answer was refused (a repeated answer, or one not signed with the
        store key): the run goes on waiting."""
        self._written: asyncio.Task[None] | None = None

    def done(self, result: ThreadResult) -> ThreadResult:
        """The run's result, kept for the job's end line."""
        self.result = result
        return result

    def outcome(self) -> str:
        """``waiting``, ``ended`` or ``refused`` (for a job that returned)."""
        if self.result is None:
            return "refused"
        return "waiting" if self.result["pending"] else "ended"

    def on_update(self, node: str, update: Any) -> None:
        self._write(self.tracker.uncounted(node, update))

    def note(self, decision: str, message: str) -> None:
        """A run-level event (started, resumed, refused), as the CLI logs them."""
        self._write(Uncounted(self.tracker.make("run", decision=decision, message=message)))

    def refuse(self, why: str) -> None:
        """The job's answer is not taken (one line): logged, and the job ends ``refused``."""
        self.refused = why
        self.note("refused", why)

    def _write(self, uncounted: Uncounted) -> None:
        before, saver = self._written, self.saver
        self._written = asyncio.get_running_loop().create_task(
            self._counted(uncounted, before, saver)
        )

    async def _counted(
        self, uncounted: Uncounted, before: asyncio.Task[None] | None, saver: Any
    ) -> None:
        if before is not None:
            await before  # lines keep the order of the updates
        book = None
        if saver is not None:
            from gated_react.runs import arun_book

            with contextlib.suppress(Exception):  # a store lost here fails the job anyway
                book = await arun_book(saver, self.tracker.thread)
        self.writer.write(self.tracker.counted(uncounted, book).record())

    async def settled(self) -> None:
        """Every line of the job counted and handed to its writer."""
        if self._written is not None:
            await self._written


class Watch:
    """A worker's recorder, shared by its jobs."""

    def __init__(self, worker: str, health: Health, *, run_log_dir: Path | None = None) -> None:
        self.worker = worker
        self.health = health
        self.secrets = _secrets()
        self._file = None if run_log_dir is None else RunLog(run_log_dir / FILE_NAME, self.secrets)
        self._store: StoreLines | None = None

    def store_answers(self) -> None:
        """The store answered: if it was lost, say since when it is back (``reconnected``)."""
        since = worker_log.lost().get("store")
        if since is None:
            return
        down = time.time() - datetime.fromisoformat(since).timestamp()
        worker_log.reconnected(self.worker, seconds=down)

    def timed(self, graph: Graph) -> Graph:
        """The graph with its model calls timed (``gated_react_model_call_duration_seconds``)."""
        return graph.with_config(callbacks=[self.health.runs.timer])

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def _writer(self, context: procrastinate.JobContext, thread: str) -> Writer:
        if self._file is not None:
            return FileWriter(self._file)
        connector = context.app.connector
        # Each life of the worker loop (a new one after a lost store) has an app of its own,
        # and the last one's connector is closed: the lines go with the current one.
        if self._store is None or self._store.connector is not connector:
            self._store = StoreLines(connector)
        return StoreWriter(self._store, thread, self.secrets)

    @contextlib.asynccontextmanager
    async def job(self, context: procrastinate.JobContext, thread: str) -> AsyncIterator[Job]:
        """Log the job's start and end, count it, and give its run a run log."""
        attempt, job_id = context.job.attempts + 1, int(context.job.id or 0)
        ids = worker_log.JobIds(self.worker, await _worker_id(context), thread, job_id, attempt)
        worker_log.job_started(ids)
        self.health.job_started(attempt)
        job = Job(thread, self._writer(context, thread), self.secrets)
        job.note("started" if attempt == 1 else "retried", f"{self.worker}, job {job_id}")
        started, outcome, error = time.monotonic(), "failed", None
        try:
            yield job
            outcome = job.outcome()
            self.store_answers()  # a job that reached its run's end: the store is back
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exception_line(exc, *self.secrets, first_only=True)}"
            outcome = await heartbeat.failed_as(context.app, context.job, exc)
            if outcome == "failed" and store_lost(exc) and not worker_log.is_lost("store"):
                worker_log.connection_lost(self.worker, exc)  # the job is retried
            raise
        finally:
            with contextlib.suppress(Exception):  # its lines are the run's echo, not the run
                await job.settled()
            await job.writer.aclose()
            self.health.job_ended(outcome)
            if job.result is not None:
                self.health.runs.job_ran(job.before, job.result)
            worker_log.job_ended(
                ids,
                outcome=outcome,
                seconds=time.monotonic() - started,
                stop_reason=None if job.result is None else job.result["stop_reason"],
                tokens=None if job.result is None else _tokens(job.result),
                error=error or job.refused,
            )


def _tokens(result: ThreadResult) -> int:
    return int((result.get("usage") or {}).get("tokens", 0))


@dataclass(frozen=True, slots=True)
class Options:
    """How a worker shows itself: where its runs' run logs go, where it answers probes."""

    run_log_dir: Path | None = None
    """``runs.log`` in this folder instead of the store's table."""
    health_host: str = "127.0.0.1"
    """The address /healthz, /readyz and /metrics answer on."""
    health_port: int | None = None
    """Their port (0: any free one, logged in ``worker_started``); None: no server."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The worker command's options for these (``options`` reads them back)."""
    parser.add_argument(
        "--run-log-dir", type=Path, help="write run logs to DIR/runs.log (default: the store)"
    )
    parser.add_argument(
        "--health-port",
        type=int,
        help="serve /healthz, /readyz, /metrics on this port (-n: worker i on PORT+i)",
    )
    parser.add_argument("--health-host", default="127.0.0.1", help="address for --health-port")


def options(args: argparse.Namespace) -> Options:
    return Options(args.run_log_dir, args.health_host, args.health_port)


def worker_args(chosen: Options, index: int) -> list[str]:
    """The options for worker ``index`` of a supervisor: each its own port."""
    out = [] if chosen.run_log_dir is None else ["--run-log-dir", str(chosen.run_log_dir)]
    if chosen.health_port is not None:
        port = _port(chosen.health_port, index)
        out += ["--health-port", str(port), "--health-host", chosen.health_host]
    return out


def _port(base: int, index: int) -> int:
    return base + index if base else 0


def check_ports(chosen: Options, processes: int = 1) -> None:
    """Every worker's health port is a port and free now (``ValueError``, one line): checked
    before any worker starts, a worker that cannot listen would exit with a traceback and,
    under ``-n``, be replaced for ever."""
    if chosen.health_port is None:
        return
    base, host = chosen.health_port, chosen.health_host
    for index in range(max(processes, 1)):
        port = _port(base, index)
        who = f"--health-port {base}"
        if port != base:
            who += f": worker-{index} would listen on {port}"
        if not 0 <= port <= _LAST_PORT:
            raise ValueError(f"{who}{'; ' if port != base else ': '}a port is 0 to {_LAST_PORT}")
        try:
            if port:
                _bind(host, port)
        except OSError as exc:
            raise ValueError(f"{who} on {host}: {_why(exc)}") from None


_LAST_PORT = 65535


def _bind(host: str, port: int) -> None:
    """Bind ``host:port`` as the health server will, and let go at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as HTTPServer does
        probe.bind((host, port))


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return "the port is in use"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return exception_line(exc, first_only=True)


@contextlib.asynccontextmanager
async def observed(
    name: str, chosen: Options, *, stalled_after: float, store: str | None = None
) -> AsyncIterator[Watch]:
    """The worker's recorder for its lifetime: probes answered, beats, start and stop lines;
    ``store`` (a Postgres connection string): whose backlog /metrics reads."""
    health = Health(name, stalled_after=stalled_after, store=store)
    server = None
    if chosen.health_port is not None:
        try:
            server = health.serve(chosen.health_host, chosen.health_port)
        except (OSError, OverflowError) as exc:  # taken since the command checked it
            where = f"--health-port {chosen.health_port} on {chosen.health_host}"
            raise ValueError(f"{where}: {_why(exc)}") from None
    beating = asyncio.create_task(health.beating())
    watch = Watch(name, health, run_log_dir=chosen.run_log_dir)
    lines = worker_log.JsonLines(name)
    logging.getLogger().addHandler(lines)  # libraries' warnings as JSON lines too
    address = None if server is None else "http://{}:{}".format(*server.server_address[:2])
    where = "store" if chosen.run_log_dir is None else str(chosen.run_log_dir / FILE_NAME)
    worker_log.emit("worker_started", name, health=address, run_log=where)
    try:
        yield watch
    finally:
        beating.cancel()
        if server is not None:
            server.shutdown()
            server.server_close()
        watch.close()
        logging.getLogger().removeHandler(lines)
        worker_log.emit("worker_stopped", name)


async def _worker_id(context: procrastinate.JobContext) -> int | None:
    """procrastinate's id of the worker that holds the job (what ``gated-react queue`` shows)."""
    with contextlib.suppress(Exception):  # a store that fails here fails the job next
        row = await context.app.connector.execute_query_one_async(_WORKER_ID, job=context.job.id)
        return None if row["worker_id"] is None else int(row["worker_id"])
    return None


def _secrets() -> tuple[str, ...]:
    """The keys the settings hold, masked in every line (the known shapes are masked anyway)."""
    from pydantic import ValidationError

    from gated_react.settings import Settings

    try:
        return Settings().secrets()
    except ValidationError:
        return ()
