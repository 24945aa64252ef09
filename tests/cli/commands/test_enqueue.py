"""``gated-react enqueue GOAL``: a run queued for the workers from the command line (it took
Python, ``enqueue_run``), its thread id printed, and run by a real worker on Postgres."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import psycopg
import pytest

from gated_react import open_checkpointer, read
from gated_react.cli.resources import shown

from ...support.cli import invoke
from ...support.helpers import REFUND_GOAL
from ...support.scenarios import graph_for
from ...support.worker_graphs import LOG_VAR
from ...support.worker_procs import fleet, until
from ...test_workers import scripted

REFUND = "tests.support.worker_graphs:refund"


def _jobs(url: str) -> list[tuple[str, dict[str, object]]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT status::text, args FROM procrastinate_jobs ORDER BY id")
        return [(str(status), dict(args)) for status, args in rows]


@pytest.mark.postgres
def test_a_run_queued_from_the_command_line_is_run_by_a_worker(
    pg_url: str, tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a store no worker has used yet: the queue's tables are made, the thread id is the
    one line on stdout (``thread=$(gated-react enqueue ...)``), and a worker runs the run."""
    monkeypatch.setenv(LOG_VAR, str(tmp_path / "decisions.tsv"))
    out = invoke("enqueue", REFUND_GOAL, "--db", pg_url)
    assert out.exit_code == 0, out.stderr
    thread = out.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{32}", thread)
    assert out.stdout == f"{thread}\n"
    assert f"gated-react queue --thread {thread}" in out.stderr
    assert _jobs(pg_url) == [("todo", {"thread_id": thread, "goal": REFUND_GOAL})]
    with fleet(pg_url, REFUND, 1, tmp_path):
        until(lambda: [status for status, _ in _jobs(pg_url)] == ["succeeded"], "run by a worker")
    with open_checkpointer(pg_url) as saver:
        assert scripted(read(graph_for({}, saver), thread))


@pytest.mark.postgres
def test_a_thread_and_a_context_are_queued_with_the_run(pg_url: str, state_dir: Path) -> None:
    out = invoke(
        "enqueue",
        "whose run?",
        "--db",
        pg_url,
        "--thread",
        "t-1",
        "--context",
        '{"user_id": "u5"}',
        "--json",
    )
    assert out.exit_code == 0, out.stderr
    assert json.loads(out.stdout) == {"thread_id": "t-1", "queued": True}
    shown = invoke("show", "t-1", "--db", pg_url)  # before: "no run is stored", nothing more
    assert shown.exit_code == 1
    assert "thread 't-1' has no run stored yet: its job waits in the workers' queue" in (
        shown.stderr
    )
    assert _jobs(pg_url) == [
        ("todo", {"thread_id": "t-1", "goal": "whose run?", "context": {"user_id": "u5"}})
    ]


@pytest.mark.postgres
def test_a_thread_with_a_job_or_a_run_already_is_refused(pg_url: str, state_dir: Path) -> None:
    """Its job would have continued that thread's run: the goal given was silently dropped."""
    assert invoke("enqueue", REFUND_GOAL, "--db", pg_url, "--thread", "taken").exit_code == 0
    again = invoke("enqueue", "another goal", "--db", pg_url, "--thread", "taken")
    assert again.exit_code == 1
    assert "thread 'taken' has jobs in the queue already" in again.stderr
    assert again.stderr.count("\n") == 1
    with open_checkpointer(pg_url) as saver:
        graph = graph_for({}, saver)
        graph.invoke({"goal": REFUND_GOAL}, {"configurable": {"thread_id": "ran"}})
    ran = invoke("enqueue", "another goal", "--db", pg_url, "--thread", "ran")
    assert ran.exit_code == 1
    assert "thread 'ran' already holds a run" in ran.stderr
    assert [args["thread_id"] for _, args in _jobs(pg_url)] == ["taken"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["  "], "the goal is empty"),
        (["go", "--context", "[1]"], "--context must be a JSON object"),
        (["go", "--context", "{"], "--context is not valid JSON"),
        (["go", "--max-steps", "3"], "No such option: --max-steps"),
        (["go", "--thread", "t" * 257], "at most 256 characters"),
        (["go", "--thread", "a\nb"], "cannot be shown (U+000A)"),  # printed escaped before
    ],
)
def test_bad_input_is_one_line_and_nothing_is_queued(
    state_dir: Path, tmp_path: Path, args: list[str], says: str
) -> None:
    out = invoke("enqueue", *args, "--db", "postgresql://nobody@127.0.0.1:1/none")
    assert out.exit_code == 1
    assert says in out.stderr
    assert out.stderr.count("\n") == 1


def test_a_sqlite_store_has_no_queue(state_dir: Path, tmp_path: Path) -> None:
    out = invoke("enqueue", "go", "--db", str(tmp_path / "runs.sqlite"))
    assert out.exit_code == 1
    assert "the workers' queue lives in a postgresql:// store" in out.stderr
    assert not (tmp_path / "runs.sqlite").exists()


@pytest.mark.postgres
def test_the_commands_it_prints_name_the_thread_as_typed(pg_url: str, state_dir: Path) -> None:
    """Before: ``gated-react queue --thread pg thread 1``, which a shell reads as three words."""
    out = invoke("enqueue", "whose run?", "--db", pg_url, "--thread", "pg thread 1")
    assert out.exit_code == 0, out.stderr
    assert out.stdout == "pg thread 1\n"
    said, store = out.stderr, shlex.quote(shown(pg_url))
    assert f"gated-react queue --thread 'pg thread 1' --db {store};" in said  # the store too
    assert f"gated-react show 'pg thread 1' --db {store}" in said
