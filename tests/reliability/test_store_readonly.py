"""A read-only store: the SQLite file or its folder made read-only with chmod (root runs the CLI
without the capabilities that ignore permissions), or the whole file system mounted read-only.
Starting or resuming a run is one line on stderr (exit 1), never a traceback; a store that can
still be read is still shown; nothing stored before is lost, and once the store is writable
again the waiting run resumes to its end."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gated_react import StoreError, open_checkpointer

from ..support.openai_server import FakeOpenAI, reply, tool_call
from .clirun import Done, environment, gated_react, here, same_run, together
from .storeenv import read_only, remount, tmpfs, unprivileged, writable

GOAL = "User 42 asked: can I get a refund for my subscription now? Answer with the USD amount."
REFUND = [
    tool_call("get_user_profile", user_id=42),
    tool_call("get_user_billing", user_id=42),
    tool_call("search_policy", query="refund pro monthly"),
    reply("Yes: USD 49.00 is refunded."),
]
ASK = ("--approve-tool", "get_user_billing")
APPROVE = ("resume", "ask", "--approve", "--toolkit", "support", *ASK)
"""The waiting run approved, under the options it ran with (never read back from the store)."""

# What chmod makes read-only (suffixes of runs.sqlite; "/" is its folder), and whether the
# store still opens (read-only) so that runs can be shown.
CASES = {
    "the database file": (("",), True),
    "every store file": (("", "-wal", "-shm", ".locks", ".log"), True),
    "files and folder": (("", "-wal", "-shm", ".locks", ".log", "/"), False),
}
READ_ONLY_WORDS = ("readonly", "read-only", "Permission denied")


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default=reply("USD 49.00.")) as fake:
        yield fake


def prepare(server: FakeOpenAI, db: str, cli: Callable[..., Done]) -> dict[str, Any]:
    """A finished thread and one waiting for approval; what ``show`` says about the first."""
    server.push(*REFUND)
    assert cli("run", GOAL, "--thread", "done", "--db", db, "--json").code == 0
    server.push(tool_call("get_user_billing", user_id=42))
    waiting = cli("run", GOAL, "--thread", "ask", *ASK, "--db", db, "--json")
    assert waiting.code == 4, waiting.err
    return here("show", "done", "--db", db, "--json").json()


def approve_and_finish(server: FakeOpenAI, db: str, cli: Callable[..., Done]) -> None:
    server.push(reply("USD 49.00 can be refunded."))
    resumed = cli(*APPROVE, "--db", db, "--json")
    assert resumed.code == 0, resumed.err
    out = resumed.json()
    assert out["stop_reason"] == "success"
    assert [h["action"]["name"] for h in out["history"]] == ["get_user_billing"]


@pytest.mark.parametrize("case", list(CASES))
def test_a_read_only_store_is_one_line_and_loses_nothing(
    case: str, server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "store"
    # A store key lets every process verify the records: without one, each process signs with
    # a key of its own, and another process counts a model call at no less than its estimate.
    key = {"GATED_REACT_STORE_KEY": "read-only-test-key-0123456789abcdef"}
    db, env = (
        str(folder / "runs.sqlite"),
        environment(monkeypatch, tmp_path, server.base_url, **key),
    )
    before = prepare(server, db, here)
    suffixes, opens = CASES[case]
    paths = [folder if s == "/" else Path(db + s) for s in suffixes]
    as_user = unprivileged()

    commands = [
        ("run", GOAL, "--thread", "new"),
        APPROVE,
        ("show", "done", "--json"),
        ("runs", "--json"),
    ]
    read_only(*paths)
    try:
        done = together(env, [(*c, "--db", db) for c in commands], prefix=as_user)
    finally:
        writable(*paths)
    started, approved, shown, listed = done
    for refused in (started, approved):
        assert refused.code == 1
        assert any(word in refused.one_error_line() for word in READ_ONLY_WORDS)
    assert "gated-react resume" not in started.one_error_line()  # "new" holds nothing
    if case == "the database file":  # refused at its first write (it used to offer resume)
        assert "thread 'new' holds nothing to resume" in started.one_error_line()
    if opens:  # a read-only store can still be read
        assert (shown.code, listed.code) == (0, 0), shown.err + listed.err
        assert same_run(shown.json()) == same_run(before)
        assert {row["thread_id"] for row in listed.json()["runs"]} >= {"done", "ask"}
    else:
        for refused in (shown, listed):
            assert any(word in refused.one_error_line() for word in READ_ONLY_WORDS)
    approve_and_finish(server, db, here)
    assert same_run(here("show", "done", "--db", db, "--json").json()) == same_run(before)


def test_a_store_on_a_read_only_mount(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file system itself read-only (a tmpfs remounted ``ro``): even opening fails, and the
    message says why; after ``remount,rw`` the waiting run continues. Runs that write go through
    child processes, which leave no open file behind to keep the mount busy."""
    env = environment(monkeypatch, tmp_path, server.base_url)

    def child(*args: str) -> Done:
        return gated_react(env, *args)

    with tmpfs(tmp_path / "mnt", "8m") as mnt:
        db = str(mnt / "runs.sqlite")
        before = prepare(server, db, child)
        remount(mnt, read_only=True)
        try:
            with pytest.raises(StoreError) as opened, open_checkpointer(f"sqlite:///{db}"):
                pass
            started = here("run", GOAL, "--thread", "new", "--db", db)
            approved = here(*APPROVE, "--db", db)
            listed = here("runs", "--db", db)
        finally:
            remount(mnt, read_only=False)
        assert "\n" not in str(opened.value)
        assert f"({mnt} is on a read-only file system)" in str(opened.value)
        for refused in (started, approved, listed):
            assert refused.code == 1
            assert "read-only file system" in refused.one_error_line()
        approve_and_finish(server, db, child)
        assert same_run(here("show", "done", "--db", db, "--json").json()) == same_run(before)


def test_a_store_that_cannot_be_opened_leaves_no_descriptor_behind(tmp_path: Path) -> None:
    """A failed open must close the connection it made: a service that retries a broken store
    would otherwise leak a file descriptor per try (and keep a read-only mount busy)."""
    path = tmp_path / "runs.sqlite"
    path.write_bytes(b"this is not a SQLite database" * 100)
    for _ in range(3):
        with (
            pytest.raises(StoreError, match="file is not a database"),
            open_checkpointer(f"sqlite:///{path}"),
        ):
            pass
    assert str(path) not in open_files()


def open_files() -> list[str]:
    """What this process has open (Linux)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
    return found
