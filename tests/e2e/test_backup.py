"""Backup and restore as "Operating a store" documents them (issue 45): a Postgres store dumped
with ``pg_dump`` and restored with ``pg_restore``, and a SQLite store copied with SQLite's backup
API while a saver holds it open, read back with their signatures intact: a keyed thread still
verifies, and a run paused before the backup is answered after the restore, its call run once.
(Both worked before this issue; these keep them working.)"""

from __future__ import annotations

import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from gated_react import Policy, build_graph, open_checkpointer, read, resume
from gated_react.store.checkpointer import StoreURL
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools._meta import idempotent

from ..support import pg
from ..support.fakes import RAN
from ..support.reaping import PATIENCE

KEY = "k" * 32
POLICY = Policy(allow=frozenset({"refund"}), require_approval=frozenset({"refund"}))


@idempotent
@tool
def refund(user_id: int) -> str:
    """Refund a user (needs a human's approval)."""
    RAN.append(f"refund {user_id}")
    return "refunded"


def _graph(saver: Any, *replies: Any) -> Any:
    return build_graph(ScriptedChatModel(replies=list(replies)), [refund], policy=POLICY,
                       checkpointer=saver)  # fmt: skip


def _backed_up(url: str) -> None:
    """A finished run (refund 7, approved) and a paused one (refund 8, asking)."""
    with open_checkpointer(url, key=KEY) as saver:
        graph = _graph(saver, call("refund", user_id=7), "done", call("refund", user_id=8))
        assert graph.invoke({"goal": "refund 7"}, {"configurable": {"thread_id": "done"}})
        assert resume(graph, "done", {"approved": True})["stop_reason"] == "success"
        assert graph.invoke({"goal": "refund 8"}, {"configurable": {"thread_id": "asking"}})


def _restored_reads_and_resumes(url: str) -> None:
    with open_checkpointer(url, key=KEY) as saver:
        graph = _graph(saver, "done")
        assert read(graph, "done")["stop_reason"] == "success"  # every row verified
        assert read(graph, "asking")["status"] == "paused"
        assert resume(graph, "asking", {"approved": True})["stop_reason"] == "success"
    assert RAN == ["refund 7", "refund 8"]


@pytest.mark.postgres
def test_a_postgres_store_restored_from_pg_dump_verifies_and_resumes(
    pg_url: str, tmp_path: Path
) -> None:
    _backed_up(pg_url)
    dump = tmp_path / "runs.dump"
    source = StoreURL.parse(pg_url).target
    subprocess.run(["pg_dump", "-Fc", "-f", str(dump), source], check=True, timeout=PATIENCE)
    server = pg.server_url()
    assert server is not None
    with pg.fresh_database(server) as restored:
        subprocess.run(
            ["pg_restore", "--no-owner", "-d", restored, str(dump)], check=True, timeout=PATIENCE
        )
        _restored_reads_and_resumes(restored)


def test_a_sqlite_store_copied_with_the_backup_api_verifies_and_resumes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    _backed_up(url)
    with open_checkpointer(url, key=KEY) as saver:  # a host holds it open (WAL mode)
        assert read(_graph(saver), "done")["status"] == "ok"
        live, copy = sqlite3.connect(tmp_path / "runs.sqlite"), sqlite3.connect(tmp_path / "c.db")
        with closing(live), closing(copy):
            live.backup(copy)
    _restored_reads_and_resumes(f"sqlite:///{tmp_path / 'c.db'}")
