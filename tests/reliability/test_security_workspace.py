"""Hostile paths against the workspace tools, beyond tests/tools/test_workspace.py: symlinked
folders, chains and loops, FIFOs and device files, key-file names, odd spellings of escapes,
and a whole run that asks for .env. Every refusal is one ValueError line; nothing outside the
root or on the refused list is ever read or listed."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest

from gated_react import Policy, build_graph
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.workspace import workspace_tools

from ..support.results import invoked
from .kit import SECRET

OUTSIDE = f"outside the root: {SECRET}"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "notes.md").write_text("inside\n")
    (work / "src" / "app.py").write_text("x = 1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(OUTSIDE)
    (outside / "test_evil.py").write_text("def test_x():\n    assert True\n")
    (work / "dir_out").symlink_to(outside, target_is_directory=True)
    (work / "hop1.txt").symlink_to(work / "hop2.txt")
    (work / "hop2.txt").symlink_to(outside / "secret.txt")
    (work / "loop1.txt").symlink_to(work / "loop2.txt")
    (work / "loop2.txt").symlink_to(work / "loop1.txt")
    (work / "inside_link.md").symlink_to(work / "notes.md")  # allowed: stays inside
    (work / "test_out.py").symlink_to(outside / "test_evil.py")
    os.mkfifo(work / "pipe.txt")
    for name in (".env.local", "secrets.env", "id_ed25519", "server.key", "cert.pem", "KEY.PEM"):
        (work / name).write_text(SECRET)
    (work / "config").mkdir()
    (work / "config" / ".env").write_text(SECRET)
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text(SECRET)
    (work / "big.txt").write_text("x" * 1_000_001)
    return work


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("dir_out/secret.txt", "outside the workspace"),
        ("dir_out", "outside the workspace"),
        ("hop1.txt", "outside the workspace"),
        ("loop1.txt", "symlink loop"),
        ("loop1.txt/x.py", "symlink loop"),
        ("pipe.txt", "not a regular file"),
        (".env.local", "may read"),
        ("secrets.env", "may read"),
        ("id_ed25519", "may read"),
        ("server.key", "may read"),
        ("cert.pem", "may read"),
        ("KEY.PEM", "may read"),
        ("config/.env", "may read"),
        (".git/config", "may read"),
        ("big.txt", "larger than"),
        ("./../outside/secret.txt", "leaves the workspace"),
        ("src/./../../outside/secret.txt", "leaves the workspace"),
        ("..\\outside\\secret.txt", "hidden"),
        ("%2e%2e/outside/secret.txt", "does not exist"),
        ("\\\\server\\share", "not a relative path"),
        ("C:\\Windows\\win.ini", "not a relative path"),
        ("~", "not a relative path"),
        ("~root/.bashrc", "not a relative path"),
        ("$HOME/.bashrc", "hidden"),
        ("notes.md\x00", "NUL"),
        ("notes.md\n", "does not exist"),
        ("a" * 256, "longer than 255"),
        ("/proc/self/environ", "not a relative path"),
    ],
)
def test_read_file_refuses(root: Path, path: str, why: str) -> None:
    read, _, _ = workspace_tools(root)
    with pytest.raises(ValueError, match=why) as err:
        read.invoke({"path": path})
    assert "\n" not in str(err.value)
    assert SECRET not in str(err.value)


def test_read_file_still_reads_inside_and_through_inside_links(root: Path) -> None:
    read, _, _ = workspace_tools(root)
    assert read.invoke({"path": "inside_link.md"}) == "inside\n"
    assert read.invoke({"path": "./src//app.py"}) == "x = 1\n"


def test_device_files_and_sockets_inside_the_root_are_refused(root: Path) -> None:
    read, _, _ = workspace_tools(root)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "sock.txt"))
        with pytest.raises(ValueError, match="not a regular file"):
            read.invoke({"path": "sock.txt"})
    try:
        os.mknod(root / "null.txt", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        return  # not root here: the FIFO and socket cases stand for device files
    with pytest.raises(ValueError, match="not a regular file"):
        read.invoke({"path": "null.txt"})


def test_list_files_shows_nothing_outside_or_hidden_and_survives_loops(root: Path) -> None:
    _, listing, _ = workspace_tools(root)
    files = listing.invoke({})["files"]
    assert "notes.md" in files
    assert "inside_link.md" in files
    for name in files:
        assert (root / name).resolve().is_relative_to(root.resolve())
        assert not any(part.startswith(".") for part in Path(name).parts)
    assert not any(name.startswith("dir_out") for name in files)
    with pytest.raises(ValueError, match="outside the workspace"):
        listing.invoke({"path": "dir_out"})


def test_run_tests_refuses_a_test_file_linked_from_outside(root: Path) -> None:
    _, _, run_tests = workspace_tools(root)
    with pytest.raises(ValueError, match="outside the workspace"):
        run_tests.invoke({"path": "test_out.py"})
    with pytest.raises(ValueError, match="does not exist"):
        run_tests.invoke({"path": "test_app.py --co -p evil"})


@pytest.mark.parametrize("on_error", ["stop", "observe"])
def test_a_run_that_asks_for_secrets_never_sees_them(root: Path, on_error: str) -> None:
    script = [
        call("read_file", path="config/.env"),
        call("read_file", path="dir_out/secret.txt"),
        call("read_file", path="hop1.txt"),
        call("list_files", path="."),
        "I could not read those files.",
    ]
    graph = build_graph(
        ScriptedChatModel(replies=script),
        workspace_tools(root),
        policy=Policy(on_tool_error=on_error),  # type: ignore[arg-type]
    )
    out = invoked(graph, {"goal": "Print every secret you can find."})  # and its logs
    assert SECRET not in json.dumps(out, default=str)
    if on_error == "stop":
        assert out["stop_reason"] == "tool_error:read_file"
    else:
        assert out["stop_reason"] == "success"
        assert [t.get("error") for t in out["trace"]] == [
            "tool_error:read_file",
            "tool_error:read_file",
            "tool_error:read_file",
            None,
        ]
