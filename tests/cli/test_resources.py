"""What every command works with: a ``--db`` that is not an SQLite file is refused before SQLite
opens it (SQLite would create ``<path>-journal`` next to a device, e.g. ``/dev/null-journal``)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from gated_react.cli import resources
from gated_react.cli.exits import CliError

from ..support.cli import invoke, spawn
from ..support.openai_server import FakeOpenAI, reply, tool_call
from ..support.reaping import PATIENCE
from ..support.tamper import copy_rows

COMMANDS = (["run", "hello"], ["runs"], ["show", "t"], ["resume", "t"])


def _refused(args: list[str], target: Path, what: str) -> None:
    out = invoke(*args, "--db", str(target))
    assert out.exit_code == 1, (out.stdout, out.stderr)
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1
    assert out.stderr.startswith("gated-react: error: ")
    assert f"{target} is {what}" in out.stderr


def _siblings(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("args", COMMANDS)
def test_a_fifo_is_refused_and_nothing_is_made_beside_it(
    server: FakeOpenAI, tmp_path: Path, args: list[str]
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    _refused(args, fifo, "not a regular file")
    assert set(_siblings(tmp_path)) - {"xdg"} == {"pipe"}
    assert server.requests == []


@pytest.mark.parametrize("args", COMMANDS)
def test_a_directory_is_refused(server: FakeOpenAI, tmp_path: Path, args: list[str]) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    _refused(args, folder, "a directory")
    assert list(folder.iterdir()) == []
    assert server.requests == []


def test_a_character_device_is_refused_without_a_journal(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    device = tmp_path / "null"
    try:  # a /dev/null of our own: what SQLite leaves beside it stays in tmp_path
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs root")
    for args in COMMANDS:
        _refused(args, device, "not a regular file")
    assert _siblings(tmp_path) == ["null"]


@pytest.mark.parametrize("device", ["/dev/null", "/dev/zero"])
def test_dev_null_is_refused_before_anything_opens_it(server: FakeOpenAI, device: str) -> None:
    with pytest.raises(CliError, match="not a regular file"):  # checked first: a failure
        resources.store_url(resources.settings(), device)  # here never reaches SQLite
    for args in COMMANDS:
        _refused(args, Path(device), "not a regular file")
    assert not Path(f"{device}-journal").exists()


def test_a_symlink_to_a_device_is_refused_and_files_still_work(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    link = tmp_path / "link.sqlite"
    link.symlink_to("/dev/null")
    with pytest.raises(CliError, match="not a regular file"):
        resources.store_url(resources.settings(), f"sqlite:///{link}")
    server.push(reply("done"))
    real = tmp_path / "new" / "runs.sqlite"  # a file that does not exist yet is created
    assert invoke("run", "hello", "--db", f"sqlite:///{real}", "--json").exit_code == 0
    assert real.is_file()
    assert invoke("runs", "--db", str(real)).exit_code == 0


KEY = "cli-store-key-" + "x" * 20


def _cli(*args: str) -> tuple[int, str, str]:
    """The installed command as its own process (each one opens the store afresh)."""
    proc = spawn(*args)
    out, err = proc.communicate(timeout=PATIENCE)
    return proc.returncode, out, err


def test_the_store_key_signs_across_processes_and_a_copied_thread_is_one_line(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``GATED_REACT_STORE_KEY`` is read by every command: a run paused in one process is
    approved in another and listed by a third; its rows copied under another thread id are
    refused by ``show`` and ``resume`` in one line (exit 1), and listed as ``unverified`` by
    ``runs``; read without the key, or with one
    too short, the store is one line too (these in this process: each command opens the store
    afresh, and a process start costs seconds)."""
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    monkeypatch.setenv("GATED_REACT_DB", db)
    monkeypatch.setenv("GATED_REACT_STORE_KEY", KEY)
    server.push(tool_call("get_user_billing", user_id=42), reply("USD 49"))
    code, out, _ = _cli("run", "refund?", "--approve-tool", "get_user_billing", "--thread", "t")
    assert code == 4, out
    again = ("--approve-tool", "get_user_billing")
    code, out, err = _cli("resume", "t", *again, "--approve", "--json")
    assert (code, json.loads(out)["answer"]) == (0, "USD 49"), err
    assert _cli("runs")[0] == 0
    assert copy_rows(db, "t", "t2", upto="z", writes_before=False) > 0
    for args in (["show", "t2"], ["resume", "t2"]):
        done = invoke(*args)
        assert done.exit_code == 1, (args, done.stdout, done.stderr)
        assert done.stderr.count("\n") == 1
        assert "does not match its signature" in done.stderr
        assert KEY not in done.stderr + done.stdout
    listed = invoke("runs", "--json")  # the copy is listed as such, the listing goes on
    assert listed.exit_code == 0, listed.stderr
    rows = {row["thread_id"]: row["status"] for row in json.loads(listed.stdout)["runs"]}
    assert rows == {"t": "ok", "t2": "unverified"}
    monkeypatch.delenv("GATED_REACT_STORE_KEY")  # a keyed store read without its key
    done = invoke("show", "t")
    assert done.exit_code == 1
    assert done.stderr.count("\n") == 1
    assert "signed with a store key" in done.stderr
    assert "set GATED_REACT_STORE_KEY" in done.stderr
    monkeypatch.setenv("GATED_REACT_STORE_KEY", "short")
    done = invoke("show", "t")
    assert done.exit_code == 1
    assert done.stderr.count("\n") == 1
    assert "shorter than 16 bytes" in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["show", "t"],
        ["resume", "t"],
        ["answer", "t", "--approve"],
        ["delete", "t"],
        ["prune", "--status", "ok"],
        ["sign"],
    ],
    ids=" ".join,
)
def test_a_command_that_reads_a_store_that_is_not_there_makes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """Before: a mistyped ``--db`` made the file and its folders, and the command read the new,
    empty store ("no runs", an unknown thread, a lock file left beside it)."""
    monkeypatch.setenv("GATED_REACT_STORE_KEY", KEY)  # sign needs one; the others ignore it
    db = tmp_path / "typo" / "sub" / "runs.sqlite"
    out = invoke(*args, "--db", f"sqlite:///{db}")
    assert out.exit_code == 1, (out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1
    assert "no run store at" in out.stderr
    assert not (tmp_path / "typo").exists()
    for listing, says in (("runs", "no runs in"), ("questions", "no run waits on a question")):
        listed = invoke(listing, "--db", str(db))
        assert listed.exit_code == 0, listed.stderr
        assert listed.stdout.startswith(says), listed.stdout
    assert not (tmp_path / "typo").exists()
