"""A thread removed from every place this package writes it (issue 45): checkpoints, their
writes and blobs, the run log's table, the workers' queue (jobs and their events) and the call
records table where a store has one; nothing of it is left in any table, every other thread
reads as before, and a thread a run or a worker holds is left whole."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import StructuredTool, tool

from gated_react import Budget, Policy, build_graph, open_checkpointer, read, resume, run
from gated_react.records.places import PLACES, forget
from gated_react.records.run_log import STORE_INSERT, STORE_SCHEMA
from gated_react.store.checkpointer import StoreURL
from gated_react.store.locks import thread_lock
from gated_react.store.rows import record_thread
from gated_react.testing import ScriptedChatModel, call

from ..support.helpers import as_subgraph
from ..support.reaping import PATIENCE
from ..support.tamper import records

KEY = "k" * 32
GONE, KEPT = "gone-7f3a9c", "kept-52d1e0"


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def _run(saver: Any, thread: str) -> None:
    graph = build_graph(
        ScriptedChatModel(replies=[call("lookup", q=thread), "done"]), [lookup],
        policy=Policy(allow=frozenset({"lookup"})), checkpointer=saver,
    )  # fmt: skip
    assert graph.invoke({"goal": f"look {thread} up"}, {"configurable": {"thread_id": thread}})


def _run_inside(saver: Any, thread: str, *, nested: bool = False) -> None:
    """The same run, the agent a node of a parent graph (a subgraph) saved by ``saver``
    (``nested``: of a graph that is itself a node of the parent)."""
    agent = build_graph(
        ScriptedChatModel(replies=[call("lookup", q=thread), "done"]), [lookup],
        policy=Policy(allow=frozenset({"lookup"})),
    )  # fmt: skip
    question = {"messages": [HumanMessage(f"look {thread} up")]}
    parent = as_subgraph(as_subgraph(agent, None), saver) if nested else as_subgraph(agent, saver)
    assert parent.invoke(question, {"configurable": {"thread_id": thread}})


def _reads(url: str, thread: str) -> str:
    with open_checkpointer(url, key=KEY) as saver:
        graph = build_graph(ScriptedChatModel(replies=[]), [lookup], checkpointer=saver)
        return str(read(graph, thread)["stop_reason"])


def _mentions(url: str, thread: str) -> list[str]:
    """Every table of the database with a row whose text holds ``thread`` anywhere."""
    with psycopg.connect(StoreURL.parse(url).target, autocommit=True) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
        )]  # fmt: skip
        return [
            table for table in tables
            if conn.execute(
                f"SELECT count(*) FROM {table} AS t WHERE position(%s in t::text) > 0"
                " OR position(%s in encode(convert_to(t::text, 'UTF8'), 'escape')) > 0",
                (thread, thread),
            ).fetchone()[0]  # type: ignore[index]
        ]  # fmt: skip


def _events(url: str, thread: str) -> int:
    """The queue's events of the thread's jobs (as they were numbered when queued)."""
    with psycopg.connect(StoreURL.parse(url).target, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM procrastinate_events WHERE job_id IN"
            " (SELECT id FROM procrastinate_jobs WHERE args->>'thread_id' = %s)"
            " OR job_id NOT IN (SELECT id FROM procrastinate_jobs)",
            (thread,),
        ).fetchone()
    return int(row[0]) if row else 0


def _queued_and_logged(url: str, *threads: str) -> None:
    """A job queued for each thread (procrastinate's own tables), run log lines in the store's
    table (the runs' call records are theirs already: ``_run`` wrote them)."""
    from gated_react.workers import enqueue_run, install_queue, make_app

    install_queue(url)
    app = make_app(url)
    with app.open():
        for thread in threads:
            enqueue_run(app, f"again {thread}", thread_id=thread)
    with psycopg.connect(StoreURL.parse(url).target, autocommit=True) as conn:
        conn.execute(STORE_SCHEMA)
        lines = [f'{{"thread": "{thread}"}}' for thread in threads]
        conn.execute(STORE_INSERT, {"threads": list(threads), "lines": lines})


@pytest.mark.postgres
def test_a_thread_goes_from_every_table_and_the_others_stay(pg_url: str) -> None:
    """Before: LangGraph's delete_thread left the run log's rows (its goal and arguments) and
    the queue's jobs, which would start the thread again."""
    with open_checkpointer(pg_url, key=KEY) as saver:
        _run(saver, GONE)
        _run(saver, KEPT)
    _queued_and_logged(pg_url, GONE, KEPT)
    everywhere = _mentions(pg_url, GONE)
    assert len(everywhere) == 6  # and its job's events, which name the job, not the thread
    assert _events(pg_url, GONE) > 0
    with open_checkpointer(pg_url, key=KEY) as saver:
        done = forget(saver, [GONE])
    assert set(done.removed[GONE]) == {p.what for p in PLACES if "postgres" in p.stores}
    assert done.left == {}
    assert _mentions(pg_url, GONE) == []
    assert _events(pg_url, GONE) == 0
    assert _mentions(pg_url, KEPT) == everywhere
    assert _events(pg_url, KEPT) > 0
    assert _reads(pg_url, KEPT) == "success"  # its signatures untouched
    with open_checkpointer(pg_url, key=KEY) as saver:
        again = forget(saver, [GONE])  # a thread not there: nothing
    assert (again.removed, again.left) == ({}, {})


def test_a_thread_goes_from_an_sqlite_store_with_its_call_records(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    with open_checkpointer(url, key=KEY) as saver:
        _run(saver, GONE)
        _run(saver, KEPT)
        removed = forget(saver, [GONE]).removed[GONE]
        assert set(removed) == {"checkpoints", "pending writes", "call records"}
        assert removed["call records"] >= 4  # its model calls, its call's permit and result
    import sqlite3

    with sqlite3.connect(tmp_path / "runs.sqlite") as conn:
        for table in ("checkpoints", "writes", "gated_react_records"):
            count = f"SELECT count(*) FROM {table} WHERE thread_id = ?"
            assert conn.execute(count, (GONE,)).fetchone() == (0,)
            assert conn.execute(count, (KEPT,)).fetchone() != (0,)


@pytest.mark.postgres
def test_a_thread_a_worker_runs_is_left_whole_and_the_others_go(pg_url: str) -> None:
    with open_checkpointer(pg_url, key=KEY) as saver:
        _run(saver, GONE)
        _run(saver, KEPT)
    _queued_and_logged(pg_url, GONE, KEPT)
    with psycopg.connect(StoreURL.parse(pg_url).target, autocommit=True) as conn:
        conn.execute("UPDATE procrastinate_jobs SET status = 'doing' WHERE args->>'thread_id' = %s",
                     (KEPT,))  # fmt: skip
    before = _mentions(pg_url, KEPT)
    with open_checkpointer(pg_url, key=KEY) as saver:
        done = forget(saver, [KEPT, GONE])
    assert done.left == {KEPT: "a worker is running it"}
    assert list(done.removed) == [GONE]
    assert _mentions(pg_url, KEPT) == before
    assert _reads(pg_url, KEPT) == "success"


def test_a_threads_subgraph_records_go_with_it(store_url: str) -> None:
    """A graph run as a subgraph keeps its records under ``<thread>|<namespace>``. Before:
    records were deleted by ``thread_id = ?``, so those stayed. A thread whose own id starts
    with the deleted one and ``|`` is another thread: its records stay (its ``|`` doubled in
    their thread id, ``store.rows.record_thread``)."""
    beside, inside = f"{GONE}|{KEPT}", f"{GONE}|agent"
    with open_checkpointer(store_url, key=KEY) as saver:
        for thread in (GONE, beside, KEPT):
            _run_inside(saver, thread, nested=thread == GONE)
        before = [row[0] for row in records(store_url)]
        done = forget(saver, [GONE])
    gone = [t for t in before if t.startswith(inside)]
    assert gone
    assert all(t.count("|agent") == 2 for t in gone)  # a subgraph's subgraph
    assert done.removed[GONE]["call records"] == len(gone)
    left = [row[0] for row in records(store_url)]
    assert left == [t for t in before if not t.startswith(inside)]
    assert any(t.startswith(record_thread(beside, "agent")) for t in left)
    assert any(t.startswith(f"{KEPT}|agent") for t in left)


def test_a_thread_a_run_advances_is_left_whole(store_url: str) -> None:
    with open_checkpointer(store_url, key=KEY) as one, open_checkpointer(store_url, key=KEY) as two:
        _run(one, GONE)
        _run(one, KEPT)
        with thread_lock(one, GONE):
            done = forget(two, [GONE, KEPT])
    assert done.left == {GONE: "a run is advancing it"}
    assert list(done.removed) == [KEPT]
    assert _reads(store_url, GONE) == "success"


def test_threads_go_a_batch_at_a_time(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from gated_react.records import places

    monkeypatch.setattr(places, "BATCH", 2)
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    with open_checkpointer(url, key=KEY) as saver:
        for n in range(5):
            _run(saver, f"t{n}")
        done = forget(saver, [f"t{n}" for n in range(5)] + ["nowhere"])
        assert sorted(done.removed) == [f"t{n}" for n in range(5)]
        assert saver.conn.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)


def _limited_run(saver: Any) -> str:
    """A run of 2 model calls on ``GONE`` under limits of 3, the thread's and the run's (a run
    begun again after a delete has a deleted run's id: the same question at the same place):
    how it ended."""
    graph = build_graph(
        ScriptedChatModel(replies=[call("lookup", q="x"), "done"]), [lookup],
        policy=Policy(
            allow=frozenset({"lookup"}), budget=Budget(thread_max_steps=3, max_steps=3)
        ),
        checkpointer=saver,
    )  # fmt: skip
    out = graph.invoke({"goal": "look x up"}, {"configurable": {"thread_id": GONE}})
    return str(out["stop_reason"])


def test_a_thread_deleted_and_begun_again_in_one_process_starts_its_limits_anew(
    store_url: str,
) -> None:
    """The thread's limits count its record, which went with it: a process that read the
    thread's record before the delete finds, as a run opens, that it is gone. Before, a run on
    the thread id again counted the deleted runs' model calls and stopped at the thread's
    limit."""
    with open_checkpointer(store_url, key=KEY) as saver:
        assert _limited_run(saver) == "success"  # 2 model calls of the thread's 3
        assert _limited_run(saver) == "max_steps"  # the thread's limit holds
        assert list(forget(saver, [GONE]).removed) == [GONE]
        assert _limited_run(saver) == "success"


def test_a_thread_deleted_by_another_process_and_begun_again_starts_its_limits_anew(
    store_url: str,
) -> None:
    """The same, the thread deleted by ``gated-react delete`` in a process of its own: the
    process that read the thread's record finds, as a run opens, that it is gone."""
    with open_checkpointer(store_url, key=KEY) as saver:
        assert _limited_run(saver) == "success"
        assert _limited_run(saver) == "max_steps"
        env = {**os.environ, "GATED_REACT_STORE_KEY": KEY}
        cli = [sys.executable, "-c", "from gated_react.cli import main; main()"]
        done = subprocess.run(
            [*cli, "delete", GONE, "--db", store_url], env=env, capture_output=True,
            text=True, timeout=PATIENCE, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert _limited_run(saver) == "success"


def _asking_graph(saver: Any, *replies: str) -> Any:
    """``lookup`` under approval, then an answer: 2 model calls a run under limits of 3
    (``replies``: the model's from where a resumed run goes on)."""
    policy = Policy(
        allow=frozenset({"lookup"}), require_approval=frozenset({"lookup"}),
        budget=Budget(thread_max_steps=3, max_steps=3),
    )  # fmt: skip
    model = ScriptedChatModel(replies=list(replies) or [call("lookup", q="x"), "done"])
    return build_graph(model, [lookup], policy=policy, checkpointer=saver)


ASKS_AGAIN = """
import sys
from gated_react import open_checkpointer, run
from tests.records.test_places import GONE, KEY, _asking_graph
with open_checkpointer(sys.argv[1], key=KEY) as saver:
    print(run(_asking_graph(saver), "look x up", thread_id=GONE)["status"])
"""


def test_a_run_begun_again_elsewhere_and_answered_here_counts_its_new_record_only(
    store_url: str,
) -> None:
    """The thread deleted and the same question asked again in another process, whose run
    (the deleted run's id) waits on a human; the answer comes to the process that read the
    deleted run: it reads the thread anew as it takes the answer. Before, it counted the
    deleted run's 2 model calls with the new run's and stopped at ``max_steps``."""
    with open_checkpointer(store_url, key=KEY) as saver:
        graph = _asking_graph(saver)
        assert run(graph, "look x up", thread_id=GONE)["status"] == "paused"
        assert resume(graph, GONE, {"approved": True})["stop_reason"] == "success"
        cli = [sys.executable, "-c", "from gated_react.cli import main; main()"]
        env = {**os.environ, "GATED_REACT_STORE_KEY": KEY}
        for command in ([*cli, "delete", GONE, "--db", store_url],
                        [sys.executable, "-c", ASKS_AGAIN, store_url]):  # fmt: skip
            done = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=PATIENCE, check=False
            )
            assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "paused"
        answered = resume(_asking_graph(saver, "done"), GONE, {"approved": True})
        assert answered["stop_reason"] == "success"


CRASH_VAR = "GATED_REACT_TEST_CRASH_IN_TOOL"


def _fragile(q: str) -> str:
    """Look something up (the process dies in it where ``CRASH_VAR`` is set)."""
    if os.environ.get(CRASH_VAR):
        os._exit(3)
    return f"found {q}"


# idempotent: the resumed run runs it again (a tool that is not asks whether it ran)
fragile = StructuredTool.from_function(_fragile, name="fragile", metadata={"idempotent": True})


def _fragile_graph(saver: Any, *replies: str) -> Any:
    """``fragile``, then an answer: 2 model calls a run under limits of 3."""
    policy = Policy(
        allow=frozenset({"fragile"}), budget=Budget(thread_max_steps=3, max_steps=3)
    )  # fmt: skip
    model = ScriptedChatModel(replies=list(replies) or [call("fragile", q="x"), "done"])
    return build_graph(model, [fragile], policy=policy, checkpointer=saver)


DIES = """
import sys
from tests.records.test_places import GONE, KEY, _fragile_graph
from gated_react import open_checkpointer
with open_checkpointer(sys.argv[1], key=KEY) as saver:
    config = {"configurable": {"thread_id": GONE}}
    _fragile_graph(saver).invoke({"goal": "look x up"}, config, durability="sync")
"""


def test_a_run_begun_again_elsewhere_and_resumed_here_after_a_crash_counts_its_new_record(
    store_url: str,
) -> None:
    """As the answered run above, the new run's process killed inside its tool call: the
    process that read the deleted run resumes it (``input=None``) and reads the thread anew
    as it goes on. Before, it stopped ``max_steps`` on the deleted run's model calls."""
    config: Any = {"configurable": {"thread_id": GONE}}
    with open_checkpointer(store_url, key=KEY) as saver:
        assert _fragile_graph(saver).invoke({"goal": "look x up"}, config)["stop_reason"] == (
            "success"
        )
        cli = [sys.executable, "-c", "from gated_react.cli import main; main()"]
        env = {**os.environ, "GATED_REACT_STORE_KEY": KEY}
        deleted = subprocess.run(
            [*cli, "delete", GONE, "--db", store_url], env=env, capture_output=True,
            text=True, timeout=PATIENCE, check=False,
        )  # fmt: skip
        assert deleted.returncode == 0, deleted.stderr
        died = subprocess.run(
            [sys.executable, "-c", DIES, store_url], env={**env, CRASH_VAR: "1"},
            capture_output=True, text=True, timeout=PATIENCE, check=False,
        )  # fmt: skip
        assert died.returncode == 3, died.stderr
        resumed = _fragile_graph(saver, "done").invoke(None, config)
        assert resumed["stop_reason"] == "success"


STOPS_AFTER = """
import sys
from tests.records.test_places import GONE, KEY, _fragile_graph
from gated_react import open_checkpointer
with open_checkpointer(sys.argv[1], key=KEY) as saver:
    config = {"configurable": {"thread_id": GONE}}
    _fragile_graph(saver).invoke({"goal": "look x up"}, config, interrupt_after=[sys.argv[2]])
"""


@pytest.mark.parametrize(
    ("stopped_after", "goes_on_at"), [("decide", "validate"), ("execute", "observe")]
)
def test_a_run_begun_again_elsewhere_and_going_on_here_at_a_node_that_reads_no_record(
    store_url: str, stopped_after: str, goes_on_at: str
) -> None:
    """As the crash above, the new run's pass ended between two nodes, so the pass here goes
    on at validate or observe, which read no record: they drop what this process read of the
    thread, and the gate or decide after them reads it anew. Before, the next node counted
    the deleted run's model calls and the run stopped ``max_steps``."""
    config: Any = {"configurable": {"thread_id": GONE}}
    with open_checkpointer(store_url, key=KEY) as saver:
        first = _fragile_graph(saver).invoke({"goal": "look x up"}, config)
        assert first["stop_reason"] == "success"
        cli = [sys.executable, "-c", "from gated_react.cli import main; main()"]
        env = {**os.environ, "GATED_REACT_STORE_KEY": KEY}
        for command in ([*cli, "delete", GONE, "--db", store_url],
                        [sys.executable, "-c", STOPS_AFTER, store_url, stopped_after]):  # fmt: skip
            done = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=PATIENCE, check=False
            )
            assert done.returncode == 0, done.stderr
        graph = _fragile_graph(saver, "done")
        assert graph.get_state(config).next == (goes_on_at,)
        assert graph.invoke(None, config)["stop_reason"] == "success"
