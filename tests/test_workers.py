"""Worker processes on a Postgres job queue (procrastinate): many runs, no run lost or run twice;
approvals through the queue; a killed worker's run finishes on another worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gated_react import open_checkpointer, read, run
from gated_react.workers import (
    enqueue_resume,
    enqueue_run,
    install_queue,
    main,
    make_app,
    start_workers,
)

from .support.docs import page, python_blocks
from .support.fleet import children
from .support.helpers import REFUND_42, REFUND_GOAL
from .support.openai_server import Delay, FakeOpenAI, reply
from .support.procs import WAIT, wait_until
from .support.reaping import PATIENCE
from .support.scenarios import graph_for
from .support.worker_graphs import LOG_VAR, STALL_VAR

RUNS, WORKERS = 200, 8
SCRIPTED_TOOLS = [reply.tool_calls[0]["name"] for reply in REFUND_42[:-1]]


@pytest.fixture
def decisions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "decisions.tsv"
    monkeypatch.setenv(LOG_VAR, str(path))
    return path


@contextmanager
def workers(url: str, factory: str, count: int, **options: Any) -> Iterator[list[Any]]:
    procs = start_workers(url, factory, count, **options)
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        for proc in procs:
            proc.wait(WAIT)


def jobs(url: str) -> list[tuple[str, str, int]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT args->>'thread_id', status::text, attempts FROM procrastinate_jobs ORDER BY id"
        ).fetchall()
    return [(str(a), str(b), int(c)) for a, b, c in rows]


def checkpoints_per_thread(url: str) -> Counter[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT thread_id, count(*) FROM checkpoints GROUP BY thread_id")
        return Counter({str(thread): int(count) for thread, count in rows})


def stored(url: str, thread: str) -> dict[str, Any]:
    with open_checkpointer(url) as saver:
        return read(graph_for({}, saver), thread)


def scripted(result: dict[str, Any]) -> bool:
    """The run went exactly as scripted: three tool steps, once each, then the answer."""
    history = result["history"]
    return (
        result["stop_reason"] == "success"
        and [entry["step"] for entry in history] == [1, 2, 3]
        and [entry["action"]["name"] for entry in history] == SCRIPTED_TOOLS
        and [entry["tool"] for entry in result["trace"]] == SCRIPTED_TOOLS
        and result["answer"] == REFUND_42[-1]
    )


@pytest.mark.postgres
def test_eight_workers_drain_200_queued_runs(pg_url: str, decisions: Path) -> None:
    install_queue(pg_url)
    app = make_app(pg_url)
    with app.open():
        threads = [
            enqueue_run(app, f"{REFUND_GOAL} (ticket {n})", thread_id=f"run-{n:03d}")
            for n in range(RUNS)
        ]
    started = time.monotonic()
    with workers(pg_url, "tests.support.worker_graphs:refund", WORKERS, burst=True) as procs:
        codes = [proc.wait(600) for proc in procs]
    elapsed = time.monotonic() - started
    print(f"\n{WORKERS} workers drained {RUNS} runs in {elapsed:.1f} s ({_busy(pg_url)})")
    assert codes == [0] * WORKERS
    assert jobs(pg_url) == [(thread, "succeeded", 1) for thread in threads]
    per_thread = checkpoints_per_thread(pg_url)
    assert sorted(per_thread) == threads
    assert len(set(per_thread.values())) == 1  # every run took the same checkpoints, once
    with open_checkpointer(pg_url) as saver:
        graph = graph_for({}, saver)
        assert all(scripted(read(graph, thread)) for thread in threads)
    finals = [line.split("\t") for line in decisions.read_text().splitlines()]
    assert len(finals) == RUNS
    assert len({goal for _, goal in finals}) == RUNS  # no run decided its answer twice
    by_worker = Counter(pid for pid, _ in finals)
    print(f"runs per worker process: {sorted(by_worker.values())}")
    assert len(by_worker) >= 2


@pytest.mark.postgres
def test_one_worker_advances_many_threads_at_once(pg_url: str, decisions: Path) -> None:
    """``--concurrency 16``: one process, many runs in flight on one event loop, each on its own
    pooled connection; every run exactly as scripted, with the same checkpoints."""
    install_queue(pg_url)
    app = make_app(pg_url)
    with app.open():
        threads = [
            enqueue_run(app, f"{REFUND_GOAL} ({n})", thread_id=f"k-{n:02d}") for n in range(48)
        ]
    factory = "tests.support.worker_graphs:refund"
    with workers(pg_url, factory, 1, burst=True, concurrency=16) as (proc,):
        assert proc.wait(600) == 0
    assert jobs(pg_url) == [(thread, "succeeded", 1) for thread in threads]
    assert 2 <= _most_at_once(pg_url) <= 16
    per_thread = checkpoints_per_thread(pg_url)
    assert sorted(per_thread) == threads
    assert len(set(per_thread.values())) == 1
    with open_checkpointer(pg_url) as saver:
        graph = graph_for({}, saver)
        assert all(scripted(read(graph, thread)) for thread in threads)
    assert len(decisions.read_text().splitlines()) == len(threads)


def _most_at_once(url: str) -> int:
    """The most jobs running at the same time, from procrastinate's events."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT at, CASE WHEN type = 'started' THEN 1 ELSE -1 END FROM procrastinate_events"
            " WHERE type IN ('started', 'succeeded') ORDER BY at, 2"
        ).fetchall()
    running = most = 0
    for _, change in rows:
        running += int(change)
        most = max(most, running)
    return most


@pytest.mark.postgres
def test_approvals_travel_through_the_queue(pg_url: str, decisions: Path) -> None:
    """Two questions; the first answer is delivered twice (a double click). The repeat names
    the question it answers, so it is refused instead of approving the second question; its
    job ends without failing (the thread has not ended and waits on)."""
    install_queue(pg_url)
    app = make_app(pg_url)

    def asks(tool: str) -> Callable[[], bool]:
        return lambda: _has(
            pg_url, "ask", lambda out: [q["tool"] for q in out["pending"]] == [tool]
        )

    with workers(pg_url, "tests.support.worker_graphs:refund_with_approval", 1), app.open():
        enqueue_run(app, REFUND_GOAL, thread_id="ask")
        wait_until(asks("get_user_billing"))
        first = stored(pg_url, "ask")["pending"][0]
        enqueue_resume(app, "ask", {"approved": True}, question=first["id"])
        enqueue_resume(app, "ask", {"approved": True}, question=first["id"])
        wait_until(lambda: [status for _, status, _ in jobs(pg_url)] == ["succeeded"] * 3)
        second = stored(pg_url, "ask")["pending"][0]
        assert second["tool"] == "search_policy"
        enqueue_resume(app, "ask", {"approved": True}, question=second["id"])
        wait_until(lambda: [status for _, status, _ in jobs(pg_url)][-1] == "succeeded")
    assert scripted(stored(pg_url, "ask"))
    assert len(decisions.read_text().splitlines()) == 1


@pytest.mark.postgres
def test_a_runs_context_travels_through_the_queue(pg_url: str) -> None:
    """``enqueue_run(context=)`` and ``enqueue_resume(context=)``: the tool reads it."""
    install_queue(pg_url)
    app = make_app(pg_url)
    graph = "tests.support.worker_graphs:reads_its_context"
    with workers(pg_url, graph, 1), app.open():
        enqueue_run(app, "whose run?", thread_id="ctx", context={"user_id": "u5"})
        wait_until(lambda: _has(pg_url, "ctx", lambda out: bool(out["pending"])))
        enqueue_resume(app, "ctx", {"approved": True}, context={"user_id": "u5"})
        wait_until(lambda: _has(pg_url, "ctx", lambda out: out["status"] == "ok"))
    assert stored(pg_url, "ctx")["history"][0]["observation"] == "the run of u5"


@pytest.mark.postgres
def test_a_spent_budget_asks_and_the_answer_travels_through_the_queue(
    pg_url: str, decisions: Path
) -> None:
    """``on_budget="ask"`` on a worker: the run pauses on its spent step budget, the answer
    is a queued resume, and the run finishes under the extension."""
    install_queue(pg_url)
    app = make_app(pg_url)
    asked = lambda: _has(  # noqa: E731
        pg_url, "budget", lambda out: [q["kind"] for q in out["pending"]] == ["budget"]
    )
    with workers(pg_url, "tests.support.worker_graphs:refund_asking_for_steps", 1), app.open():
        enqueue_run(app, REFUND_GOAL, thread_id="budget")
        wait_until(asked)
        question = stored(pg_url, "budget")["pending"][0]
        assert question["args"] == {"budget": "max_steps", "spent": 2, "limit": 2, "proposed": 4}
        enqueue_resume(app, "budget", {"decisions": [{"type": "approve"}]}, question=question["id"])
        wait_until(lambda: [status for _, status, _ in jobs(pg_url)] == ["succeeded"] * 2)
    done = stored(pg_url, "budget")
    assert (done["stop_reason"], done["answer"]) == ("success", REFUND_42[-1])
    assert [e.get("extended") for e in done["trace"] if e.get("extended")] == [
        "max_steps 2 -> 4 (approve)"
    ]


@pytest.mark.postgres
def test_a_killed_workers_run_finishes_on_another_worker(
    pg_url: str, decisions: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stall = tmp_path / "stall-once"
    stall.touch()
    monkeypatch.setenv(STALL_VAR, str(stall))
    install_queue(pg_url)
    app = make_app(pg_url)
    with app.open():
        enqueue_run(app, REFUND_GOAL, thread_id="orphan")
    factory = "tests.support.worker_graphs:refund"
    with workers(pg_url, factory, 1, stalled_after=1.5) as (doomed,):
        wait_until(lambda: not stall.exists())  # the worker hangs inside decide, step 2
        doomed.kill()
        doomed.wait(WAIT)
    assert stored(pg_url, "orphan")["status"] is None
    with workers(pg_url, factory, 1, stalled_after=1.5):
        wait_until(lambda: jobs(pg_url) == [("orphan", "succeeded", 2)])
    assert scripted(stored(pg_url, "orphan"))
    assert len(decisions.read_text().splitlines()) == 1


@pytest.mark.postgres
def test_the_documented_factorys_model_call_ends_at_openai_timeout_seconds(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The factory of the workers' guide, as written there, on a real worker against a model
    server that hangs: the call ends at ``OPENAI_TIMEOUT_SECONDS`` (``llm_timeout``). The
    guide's ``ChatOpenAI(model=...)`` read no timeout: the run waited out its whole
    ``max_seconds`` (20 s) and ended ``max_seconds``."""
    factory = python_blocks(page("guides/workers.md"))[0]
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "agent.py").write_text(factory)
    install_queue(pg_url)
    app = make_app(pg_url)
    with FakeOpenAI(default=Delay(PATIENCE, reply("late"))) as model:
        for name, value in {
            "PYTHONPATH": str(tmp_path),
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_TIMEOUT_SECONDS": "1",
            "OPENAI_MAX_RETRIES": "0",
        }.items():
            monkeypatch.setenv(name, value)
        with app.open():
            enqueue_run(app, REFUND_GOAL, thread_id="hung")
        with workers(pg_url, "myapp.agent:make_graph", 1, burst=True) as (proc,):
            assert proc.wait(WAIT) == 0
    ended = stored(pg_url, "hung")
    assert ended["stop_reason"] == "llm_timeout", ended["message"]
    assert "did not answer in time" in str(ended["message"])
    assert len(model.requests) == 1


def _has(url: str, thread: str, check: Callable[[dict[str, Any]], bool]) -> bool:
    try:
        return check(stored(url, thread))
    except LookupError:
        return False


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--store", "sqlite:///runs.sqlite", "--graph", "m:f"], "workers need a postgresql://"),
        (["--store", "postgresql://u:hunter2@h/db", "--graph", "nofactory"], "module:function"),
        (["--store", "postgresql://h/db", "--graph", "no_such_mod:f"], "cannot import"),
        (
            ["--store", "postgresql://h/db", "--graph", "tests.support.helpers:nope"],
            "no function nope",
        ),
    ],
)
def test_bad_worker_arguments_are_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err
    assert err.count("\n") == 1
    assert "hunter2" not in err


@pytest.mark.postgres
def test_a_factory_that_drops_the_checkpointer_is_refused(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["--store", pg_url, "--graph", "tests.support.worker_graphs:forgets_the_checkpointer"])
        == 2
    )
    assert "must pass its checkpointer" in capsys.readouterr().err


@pytest.mark.postgres
def test_a_factory_that_raises_is_one_line_and_exit_2(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker that cannot build its graph cannot start: one line, exit 2 (the supervisor
    then stops the fleet rather than replace it for ever), not a traceback."""
    graph = "tests.support.worker_graphs:raises"
    assert main(["--store", pg_url, "--graph", graph, "--burst"]) == 2
    last = capsys.readouterr().err.splitlines()[-1]  # after the worker's JSON log lines
    assert last == (
        "gated-react worker: graph factory raises raised RuntimeError: OPENAI_API_KEY is not set"
    )


@pytest.mark.postgres
@pytest.mark.parametrize("worker_key", ["another-store-key-" + "b" * 20, None])
def test_a_worker_whose_key_fits_none_of_the_stores_threads_does_not_start(
    pg_url: str, worker_key: str | None, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """With another key (or none) every job would be refused as it came, a human's answer
    among them, while the worker said it was ready: it stops at once instead, exit 2."""
    with open_checkpointer(pg_url, key="the-store-key-" + "a" * 20) as saver:
        run(graph_for({}, saver), REFUND_GOAL, thread_id="signed")
    if worker_key is None:
        monkeypatch.delenv("GATED_REACT_STORE_KEY", raising=False)
    else:
        monkeypatch.setenv("GATED_REACT_STORE_KEY", worker_key)
    graph = "tests.support.worker_graphs:refund"
    assert main(["--store", pg_url, "--graph", graph, "--burst"]) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("gated-react worker: this store's newest checkpoints are signed")
    assert "checkpoints are signed and GATED_REACT_STORE_KEY " in last
    assert ("is not set" if worker_key is None else "verifies none of them") in last


@pytest.mark.postgres
def test_the_supervisor_stops_its_workers_on_sigterm(pg_url: str, tmp_path: Path) -> None:
    """SIGTERM the moment both workers are registered. It used to fail now and then: a worker
    registers itself before procrastinate installs its signal handlers, so a SIGTERM in between
    killed it (its row left behind) and ``max()`` of 0 and -15 still said 0. Workers now take
    their signals from the start (``worker._on_signals``). A SIGUSR1 before shows where each
    worker waits, and stops none (``workers/stacks.py``)."""
    command = ["-m", "gated_react.workers", "--store", pg_url, "-n", "2"]
    command += ["--graph", "tests.support.worker_graphs:refund"]
    log = tmp_path / "fleet.log"
    with log.open("wb") as err:
        supervisor = subprocess.Popen([sys.executable, *command], stderr=err)
    try:
        wait_until(lambda: _workers_registered(pg_url) == 2)
        for pid in children(supervisor.pid):  # where each waits; each goes on (then drains)
            os.kill(pid, signal.SIGUSR1)
        wait_until(lambda: log.read_text(errors="replace").count("asyncio tasks:") == 2)
        assert "Current thread" in log.read_text(errors="replace")
        supervisor.terminate()
        assert supervisor.wait(WAIT) == 0
        assert _workers_registered(pg_url) == 0
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait(WAIT)


def _workers_registered(url: str) -> int:
    try:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()
    except psycopg.errors.UndefinedTable:
        return 0
    return int(row[0]) if row else 0


def _busy(url: str) -> str:
    """How long the queue was being worked on, from procrastinate's own job events."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM max(at) - min(at)) FROM procrastinate_events"
            " WHERE type IN ('started', 'succeeded')"
        ).fetchone()
    return f"first job started to last job done: {float(row[0]) if row else 0:.1f} s"


def test_a_bad_store_key_stops_the_worker_before_it_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked once, exit 2, before any worker starts (a supervisor does not replace it)."""
    monkeypatch.setenv("GATED_REACT_STORE_KEY", "hunter2")
    argv = ["--store", "postgresql://h/db", "--graph", "tests.support.worker_graphs:refund"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "shorter than 16 bytes" in err
    assert err.count("\n") == 1
    assert "hunter2" not in err
