"""Opening stores from URLs: each kind, folders created, one-line errors without passwords."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from gated_react.store.checkpointer import (
    StoreError,
    StoreURL,
    aopen_checkpointer,
    open_checkpointer,
)

from ..support.procs import context, open_store
from ..support.reaping import PATIENCE


@pytest.mark.parametrize(
    ("url", "kind", "target"),
    [
        ("memory", "memory", ""),
        ("sqlite:///runs/a.sqlite", "sqlite", "runs/a.sqlite"),
        ("sqlite:////var/lib/a.sqlite", "sqlite", "/var/lib/a.sqlite"),
        ("runs.sqlite", "sqlite", "runs.sqlite"),
        ("postgresql://u:p@h/db", "postgres", "postgresql://u:p@h/db"),
        ("postgres://u@h/db", "postgres", "postgres://u@h/db"),
    ],
)
def test_parse(url: str, kind: str, target: str) -> None:
    store = StoreURL.parse(url)
    assert (store.kind, store.target) == (kind, target)


def test_sqlite_is_created_with_its_folders(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "runs.sqlite"
    with open_checkpointer(f"sqlite:///{path}") as saver:
        assert isinstance(saver, SqliteSaver)
    assert path.exists()
    with open_checkpointer("memory") as memory:
        assert isinstance(memory, InMemorySaver)

    async def opened() -> type:
        async with aopen_checkpointer(str(tmp_path / "async.sqlite")) as saver:
            return type(saver)

    assert issubclass(asyncio.run(opened()), AsyncSqliteSaver)  # with adelete_for_runs, aprune


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("", "empty store URL"),
        ("ftp://host/x", "unknown scheme 'ftp'"),
        ("sqlite:///", "no file path"),
        ("/proc/no/such/dir/runs.sqlite", "cannot create"),
        ("postgresql://app:hunter22@127.0.0.1:1/runs", "app:***@127.0.0.1:1/runs"),
        ("postgresql://app:hunter22@[::1:1/runs", "Invalid IPv6 URL"),
    ],
)
def test_errors_are_one_line_and_mask_passwords(url: str, says: str) -> None:
    with pytest.raises(StoreError) as err, open_checkpointer(url):
        pass
    message = str(err.value)
    assert says in message
    assert "hunter22" not in message
    assert "\n" not in message


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.sqlite"
    bogus.write_text("this is not sqlite " * 100)
    with pytest.raises(StoreError, match="not a database"), open_checkpointer(str(bogus)):
        pass


@pytest.mark.postgres
def test_many_processes_can_open_a_fresh_postgres_store_at_once(
    pg_url: str, tmp_path: Path
) -> None:
    """Workers starting together all set up the same new database; none may fail."""
    go = tmp_path / "go"
    opening = [context().Process(target=open_store, args=(pg_url, str(go))) for _ in range(8)]
    try:
        for proc in opening:
            proc.start()
        go.touch()
        for proc in opening:
            proc.join(PATIENCE)
        assert [proc.exitcode for proc in opening] == [0] * 8
    finally:
        for proc in opening:
            if proc.is_alive():
                proc.kill()
            proc.join(PATIENCE)


@pytest.mark.postgres
def test_the_async_postgres_saver_comes_back_after_a_server_restart() -> None:
    """Before: ``aopen_checkpointer`` held one connection, and after ``pg_ctl restart`` every
    call failed with ``the connection is closed`` until the process (``langgraph dev``)
    restarted. Now its pool checks each connection before use and reconnects."""
    from gated_react import build_graph
    from gated_react.testing import ScriptedChatModel
    from gated_react.tools.support import SUPPORT_TOOLS

    from ..support.fleet import private_cluster, restart_cluster

    async def across_a_restart(url: str, folder: Path) -> list[str]:
        async with aopen_checkpointer(url, key="k" * 32) as saver:
            model = ScriptedChatModel(replies=["before", "after"])
            graph = build_graph(model, SUPPORT_TOOLS, checkpointer=saver)
            config = {"configurable": {"thread_id": "before"}}
            assert (await graph.ainvoke({"goal": "hi"}, config))["messages"][-1].text == "before"
            await asyncio.to_thread(restart_cluster, folder)
            config = {"configurable": {"thread_id": "after"}}
            done = await graph.ainvoke({"goal": "hi again"}, config)
            earlier = await graph.aget_state({"configurable": {"thread_id": "before"}})
            answers = [done["messages"][-1].text, earlier.values["messages"][-1].text]
            await saver.adelete_thread("before")
            assert await saver.aget_tuple({"configurable": {"thread_id": "before"}}) is None
            return answers

    with private_cluster() as (url, folder):
        assert asyncio.run(across_a_restart(url, folder)) == ["after", "before"]


def test_a_new_store_opened_by_processes_at_once_is_set_up_again_while_sqlite_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: processes opening one new SQLite store at once could meet in SQLite's lock
    upgrade, which it refuses at once ("database is locked", no busy wait), and the open failed
    (seen once in four processes racing to claim calls). Now the set-up is tried again; any
    other error is the store's at once."""
    from gated_react.store import checkpointer

    monkeypatch.setattr(checkpointer, "_SET_UP_WAITS", (0.0,) * 3)
    tries: list[int] = []

    def refused_twice() -> None:
        tries.append(1)
        if len(tries) < 3:
            raise sqlite3.OperationalError("database is locked")

    checkpointer._set_up(refused_twice)
    assert len(tries) == 3

    async def arefused_twice() -> None:
        refused_twice()

    tries.clear()
    asyncio.run(checkpointer._aset_up(arefused_twice))
    assert len(tries) == 3

    def broken() -> None:
        tries.append(1)
        raise sqlite3.OperationalError("disk I/O error")

    tries.clear()
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        checkpointer._set_up(broken)
    assert len(tries) == 1
