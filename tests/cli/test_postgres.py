"""``gated-react`` on a PostgreSQL store: runs, listing by one SQL query, show and resume."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from gated_react import open_checkpointer
from gated_react.records.run_listing import latest_runs

from ..support.cli import invoke
from ..support.openai_server import FakeOpenAI, reply, tool_call
from .commands.test_runs_show import Counting

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh database on the test server, dropped afterwards."""
    yield from _database()


@pytest.fixture
def other_pg_url() -> Iterator[str]:
    """A second fresh database on the same server."""
    yield from _database()


def _database() -> Iterator[str]:
    base = os.environ.get("GATED_REACT_TEST_POSTGRES_URL")
    if not base:
        if os.environ.get("GATED_REACT_REQUIRE_POSTGRES") == "1":
            pytest.fail("GATED_REACT_TEST_POSTGRES_URL is not set")
        pytest.skip("no PostgreSQL server (set GATED_REACT_TEST_POSTGRES_URL)")
    import psycopg

    name = f"gr_cli_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlsplit(base)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_runs_on_postgres(server: FakeOpenAI, pg_url: str) -> None:
    for i in range(4):
        server.push(reply(f"answer {i}"))
        assert invoke("run", f"goal {i}", "--db", pg_url, "--thread", f"pg-{i}").exit_code == 0
    server.push(tool_call("get_user_billing", user_id=42), reply("USD 49"))
    paused = invoke(
        "run", "x", "--db", pg_url, "--thread", "pg-p", "--approve-tool", "get_user_billing"
    )
    assert paused.exit_code == 4
    listed = json.loads(invoke("runs", "--db", pg_url, "--json", "--limit", "3").stdout)
    assert listed["total"] == 5
    assert [r["thread_id"] for r in listed["runs"]] == ["pg-p", "pg-3", "pg-2"]
    assert [r["status"] for r in listed["runs"]] == ["paused", "ok", "ok"]
    with open_checkpointer(pg_url) as saver:
        counting = Counting(saver)
        rows, total = latest_runs(saver, 2)
        assert (counting.loads, total, len(rows)) == (2, 5, 2)
    again = ("--approve-tool", "get_user_billing")
    done = invoke("resume", "pg-p", "--db", pg_url, *again, "--approve", "--json")
    assert done.exit_code == 0
    shown = json.loads(invoke("show", "pg-p", "--db", pg_url, "--json").stdout)
    assert shown["answer"] == "USD 49"
    assert [e["node"] for e in shown["events"]][-1] == "finish"


def test_delete_and_prune_on_postgres(server: FakeOpenAI, pg_url: str) -> None:
    for i in range(3):
        server.push(reply(f"answer {i}"))
        assert invoke("run", f"goal {i}", "--db", pg_url, "--thread", f"pg-{i}").exit_code == 0
    out = invoke("delete", "pg-1", "--db", pg_url, "--json")
    assert out.exit_code == 0, out.stderr
    assert set(json.loads(out.stdout)["deleted"]["pg-1"]) >= {"checkpoints", "pending writes"}
    pruned = invoke("prune", "--status", "ok", "--db", pg_url, "--json")
    assert set(json.loads(pruned.stdout)["deleted"]) == {"pg-0", "pg-2"}
    assert json.loads(invoke("runs", "--db", pg_url, "--json").stdout)["total"] == 0


def test_each_database_has_a_run_log_of_its_own(
    server: FakeOpenAI, pg_url: str, other_pg_url: str, state_dir: Path
) -> None:
    """Before: every Postgres store logged to one ``runs.log``: ``show`` mixed two databases'
    threads of one id, and ``delete`` in one database removed the other's lines."""
    for url, goal in ((pg_url, "goal in A"), (other_pg_url, "goal in B")):
        server.push(reply("done"))
        assert invoke("run", goal, "--db", url, "--thread", "same").exit_code == 0
    shared = state_dir / "runs.log"
    shared.write_text('{"time": "2026-01-01T00:00:00", "thread": "same", "node": "legacy"}\n')
    deleted = json.loads(invoke("delete", "same", "--db", other_pg_url, "--json").stdout)
    assert deleted["deleted"]["same"]["run log file lines"] > 0
    events = json.loads(invoke("show", "same", "--db", pg_url, "--json").stdout)["events"]
    nodes = [event["node"] for event in events]
    assert nodes[0] == "legacy"  # a line of the shared log kept and read
    assert "finish" in nodes
    goals = [event["action"]["goal"] for event in events if event["node"] == "run"]
    assert goals == ["goal in A"]  # none of the other database's thread of the same id
    assert shared.read_text().count("legacy") == 1  # never edited: other stores' lines
    logs = sorted(path.name for path in state_dir.glob("runs-*.log"))
    assert len(logs) == 2
    assert all(name.startswith("runs-gr_cli_") for name in logs)
