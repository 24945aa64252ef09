"""The sandbox's parts one at a time, beside test_sandbox.py's whole runs: the bwrap probe and its
messages, the mount plan in its exact order, the masks, the command and environment a run gets,
the three ways a run ends, and the tail of its output."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from gated_react.tools import sandbox
from gated_react.tools.sandbox import RunStopped, RunTimedOut, SandboxUnavailable

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


class Recorder:
    """Popen that records how the run was started, then runs ``script`` instead."""

    def __init__(self, script: str) -> None:
        self.script = script
        self.seen: list[Any] = []

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        empty = next((Path(arg) for arg in command if arg.startswith("EMPTY=")), None)
        self.seen.append((command, kwargs, empty))
        return POPEN([sys.executable, "-c", self.script], **kwargs)


@pytest.mark.parametrize("use_bwrap", [True, False])
def test_a_run_gets_pytest_the_workspace_and_no_secrets(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, use_bwrap: bool
) -> None:
    for key in ("PATH", "LANG", "TMPDIR"):
        monkeypatch.setenv(key, f"/v/{key}")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.delenv("LC_ALL", raising=False)
    empties: list[bytes] = []

    def prefix(root: Path, empty: Path) -> list[str]:
        empties.append(empty.read_bytes())
        return ["BWRAP", str(root)]

    monkeypatch.setattr(sandbox, "bwrap_prefix", prefix)
    popen = Recorder("import sys; print('out'); sys.exit(1)")
    monkeypatch.setattr(sandbox.subprocess, "Popen", popen)
    target = workspace / "test_x.py"
    out = sandbox.run_pytest(workspace, target, 30, sandbox=use_bwrap)
    assert out == {"exit_code": 1, "passed": False, "output": "out\n"}
    [(command, kwargs, _)] = popen.seen
    pytest_command = [sys.executable, "-m", "pytest", str(target), "-q", "-p", "no:cacheprovider"]
    tmpdir = "/tmp" if use_bwrap else "/v/TMPDIR"
    assert command == (["BWRAP", str(workspace)] if use_bwrap else []) + pytest_command
    assert empties == ([b""] if use_bwrap else [])
    assert kwargs["env"] == {"PATH": "/v/PATH", "LANG": "/v/LANG", "TMPDIR": tmpdir}
    assert kwargs["cwd"] == workspace
    assert kwargs["stdin"] == subprocess.DEVNULL
    assert kwargs["stderr"] == subprocess.STDOUT
    assert kwargs["start_new_session"] is True


def test_a_passing_run_says_so(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox.subprocess, "Popen", Recorder("pass"))
    out = sandbox.run_pytest(workspace, workspace / "t.py", 30, sandbox=False)
    assert out == {"exit_code": 0, "passed": True, "output": ""}


@pytest.mark.parametrize(
    ("script", "error", "message"),
    [
        ("import time; time.sleep(60)", RunTimedOut, "tests did not finish within 0.3 s and were"),
        (
            "import sys, time; sys.stdout.write('x' * 3000); sys.stdout.flush(); time.sleep(60)",
            RunStopped,
            "tests wrote more than 2000 bytes and were killed",
        ),
    ],
)
def test_a_run_that_hangs_or_floods_is_killed_with_its_reason(
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    error: type[Exception],
    message: str,
) -> None:
    monkeypatch.setattr(sandbox, "MAX_OUTPUT_BYTES", 2000)
    monkeypatch.setattr(sandbox.subprocess, "Popen", Recorder(script))
    timeout = 0.3 if error is RunTimedOut else 30
    with pytest.raises(error) as err:
        sandbox.run_pytest(workspace, workspace / "t.py", timeout, sandbox=False)
    assert str(err.value).startswith(message)


def _started(script: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", script], start_new_session=True)


@pytest.mark.parametrize("pidfd", [True, False])
def test_waiting_for_an_exit_does_not_reap(monkeypatch: pytest.MonkeyPatch, pidfd: bool) -> None:
    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open")
    proc = _started("import time; time.sleep(60)")
    waiter = sandbox._Exit(proc)
    try:
        assert waiter.wait(0.05) is False
        proc.kill()
        assert waiter.wait(30) is True
        assert (proc.returncode is None) is pidfd  # a pidfd leaves the zombie to be reaped
    finally:
        waiter.close()
        waiter.close()  # twice is harmless
        proc.kill()
        proc.wait()


def _dead(pid: int, guard: float = 10) -> bool:
    """Whether ``pid`` is gone or a zombie within ``guard`` s (a kill lands asynchronously)."""
    deadline = time.monotonic() + guard
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize(
    ("script", "timeout", "why"),
    [
        ("pass", 30.0, "done"),
        ("time.sleep(60)", 0.3, "timeout"),
        ("os.write(1, b'x' * 3000); time.sleep(60)", 30.0, "output"),
    ],
)
def test_every_run_ends_with_its_group_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, timeout: float, why: str
) -> None:
    monkeypatch.setattr(sandbox, "MAX_OUTPUT_BYTES", 2000)
    pid_file = tmp_path / "pid"
    code = (
        "import os, pathlib, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(child.pid))\n"
        f"{script}\n"
    )
    with tempfile.TemporaryFile() as output:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=output, start_new_session=True)
        assert sandbox._wait_then_kill(proc, timeout, output) == why
    assert proc.returncode is not None  # reaped
    assert _dead(int(pid_file.read_text()))  # and the rest of its group killed


@pytest.mark.parametrize(
    ("written", "tail"),
    [
        (b"short", "short"),
        ("é".encode() * 5000, "é" * 4000),
        (b"a" * 10 + b"b" * 4000, "b" * 4000),
    ],
)
def test_the_tail_is_the_last_4000_characters(written: bytes, tail: str) -> None:
    with tempfile.TemporaryFile() as output:
        output.write(written)
        assert sandbox._tail(output) == tail
