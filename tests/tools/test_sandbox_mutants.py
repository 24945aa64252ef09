"""The sandbox's parts one at a time, beside test_sandbox.py's whole runs: the bwrap probe and its
messages, the mount plan in its exact order, the masks, the command and environment a run gets,
the three ways a run ends, and the tail of its output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gated_react.tools import sandbox
from gated_react.tools.sandbox import RunStopped, SandboxUnavailable

ISOLATION = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
POPEN = subprocess.Popen
OPT_OUT = "or pass sandbox=False to workspace_tools to run the tests unconfined"


def fake_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "bwrap").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "calls"}\n{body}\n')
    (folder / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setattr(sandbox, "_working", set())
    return folder / "bwrap"


def test_a_working_bwrap_is_probed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bwrap = fake_bwrap(tmp_path, monkeypatch, "exit 0")
    assert sandbox._bwrap() == str(bwrap)
    assert sandbox._bwrap() == str(bwrap)
    probe = " ".join([*ISOLATION, "--ro-bind", "/", "/", sys.executable, "-c"])
    assert (tmp_path / "calls").read_text() == probe + " \n"


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("echo 'bwrap: no\n  namespaces' >&2; exit 1", "bwrap: no namespaces"),
        ("exit 3", "exit code 3"),
        ("i=0; while [ $i -lt 300 ]; do printf x >&2; i=$((i+1)); done; exit 1", "x" * 200),
    ],
)
def test_a_broken_bwrap_is_refused_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, why: str
) -> None:
    bwrap = fake_bwrap(tmp_path, monkeypatch, body)
    for _ in range(2):  # a failed probe is not remembered as working
        with pytest.raises(SandboxUnavailable) as err:
            sandbox._bwrap()
        assert str(err.value) == (
            f"run_tests runs the workspace's code in a sandbox and {bwrap} cannot create one "
            f"here ({why}): allow unprivileged user namespaces {OPT_OUT}"
        )
    assert len((tmp_path / "calls").read_text().splitlines()) == 2


@pytest.mark.parametrize(
    "error",
    [OSError("exec format error"), subprocess.TimeoutExpired("bwrap", 30)],
)
def test_a_probe_that_cannot_run_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    bwrap = fake_bwrap(tmp_path, monkeypatch, "exit 0")
    seen: list[dict[str, Any]] = []

    def run(*_: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        raise error

    monkeypatch.setattr(sandbox.subprocess, "run", run)
    with pytest.raises(SandboxUnavailable) as err:
        sandbox._bwrap()
    assert f"{bwrap} cannot create one here ({error}): allow" in str(err.value)
    assert seen == [{"check": False, "capture_output": True, "text": True, "timeout": 30}]


def test_no_bwrap_at_all_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable) as err:
        sandbox._bwrap()
    assert str(err.value) == (
        "run_tests runs the workspace's code in a sandbox and bubblewrap (bwrap) is not "
        f"installed: install it (Debian/Ubuntu: apt-get install bubblewrap) {OPT_OUT}"
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "w"
    (root / "app").mkdir(parents=True)
    (root / ".venv").mkdir()
    (root / ".venv" / ".inner").write_text("")  # inside a masked folder: no mask of its own
    (root / ".env").write_text("secret")
    (root / "app" / ".env.local").write_text("secret")
    (root / "app" / "main.py").write_text("")
    (root / ".link").symlink_to(root / "app" / "main.py")  # links are never masked
    return root


def test_every_hidden_entry_is_masked_once(workspace: Path) -> None:
    empty = workspace.parent / "empty"
    assert sorted(sandbox._masks(workspace, empty)) == [
        ["--ro-bind", str(empty), str(workspace / ".env")],
        ["--ro-bind", str(empty), str(workspace / "app" / ".env.local")],
        ["--tmpfs", str(workspace / ".venv")],
    ]


def test_a_hidden_link_to_a_folder_does_not_stop_the_masking(tmp_path: Path) -> None:
    """The link is listed with the folders, before every file: the files are masked still."""
    (tmp_path / "app").mkdir()
    (tmp_path / ".alias").symlink_to(tmp_path / "app", target_is_directory=True)
    (tmp_path / ".env").write_text("secret")
    (tmp_path / "app" / ".env").write_text("secret")
    assert sorted(sandbox._masks(tmp_path, tmp_path / "e")) == [
        ["--ro-bind", str(tmp_path / "e"), str(tmp_path / ".env")],
        ["--ro-bind", str(tmp_path / "e"), str(tmp_path / "app" / ".env")],
    ]


@pytest.mark.parametrize(("hidden", "refused"), [(3, False), (4, True)])
def test_at_most_max_masks_hidden_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hidden: int, refused: bool
) -> None:
    monkeypatch.setattr(sandbox, "MAX_MASKS", 3)
    for i in range(hidden):
        (tmp_path / f".h{i}").write_text("")
    if not refused:
        assert len(sandbox._masks(tmp_path, tmp_path / "e")) == 3
        return
    with pytest.raises(RunStopped) as err:
        sandbox._masks(tmp_path, tmp_path / "e")
    assert str(err.value) == (
        "the workspace has more than 3 hidden files and folders to hide from the tests; "
        "the tests were not run"
    )


def test_the_mount_plan_puts_each_folder_before_what_lies_inside(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp = workspace.parent
    (tmp / "sys").mkdir()
    (tmp / "syslink").symlink_to("sys")
    python = [str(tmp / "py"), str(workspace / ".venv")]
    monkeypatch.setattr(sandbox, "_SYSTEM", (str(tmp / "sys"), str(tmp / "syslink"), "/nope"))
    monkeypatch.setattr(sandbox, "_python", lambda: python)
    empty = tmp / "empty"
    w = str(workspace)
    assert sandbox._mounts(workspace, empty) == [
        *("--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
        *("--ro-bind", str(tmp / "sys"), str(tmp / "sys")),
        *("--symlink", "sys", str(tmp / "syslink")),
        *("--bind", w, w),
        *("--ro-bind", python[0], python[0]),  # as deep as the workspace, after it
        *("--tmpfs", f"{w}/.venv", "--ro-bind", str(empty), f"{w}/.env"),
        *("--ro-bind", python[1], python[1]),  # the virtualenv shows through its mask
        *("--ro-bind", str(empty), f"{w}/app/.env.local"),
    ]


def test_the_command_line_runs_in_the_workspace(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "_bwrap", lambda: "/x/bwrap")
    monkeypatch.setattr(sandbox, "_mounts", lambda root, empty: ["M", str(root), str(empty)])
    assert sandbox.bwrap_prefix(workspace, Path("/e")) == [
        "/x/bwrap",
        *ISOLATION,
        *("M", str(workspace), "/e"),
        *("--chdir", str(workspace), "--"),
    ]


def test_python_is_shown_unless_usr_already_shows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "base" / "bin").mkdir(parents=True)
    (tmp_path / "venv").mkdir()
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setattr(sys, "exec_prefix", "/")
    monkeypatch.setattr(sys, "base_prefix", "/usr/lib/python3")
    monkeypatch.setattr(sys, "base_exec_prefix", str(tmp_path / "missing"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "base" / "bin" / "python"))
    assert sandbox._python() == [str(tmp_path / "base" / "bin"), str(tmp_path / "venv")]
