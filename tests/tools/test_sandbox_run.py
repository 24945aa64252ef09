"""How the sandbox runs the tests, beside test_sandbox.py's whole runs: the command and
environment a run gets, the three ways a run ends with its process group killed, the waiter that
does not reap, the tail of the output, and what the workspace code can reach."""

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
from gated_react.tools.sandbox import RunStopped, RunTimedOut

from ..support.reaping import PATIENCE, reap, wait_for
from .test_sandbox import probe_outside

POPEN = subprocess.Popen


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "w"
    root.mkdir()
    return root


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
    for key in ("LC_ALL", "TZ", "PYTHONPATH", "SYSTEMROOT"):
        monkeypatch.delenv(key, raising=False)
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


def _dead(pid: int, guard: float = PATIENCE) -> bool:
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
        try:
            # The clock starts once the child is there: on a loaded machine 0.3 s may pass
            # before the interpreter runs a line, and then there is no group to check.
            wait_for(pid_file.exists, proc, "the child's pid")
            assert sandbox._wait_then_kill(proc, timeout, output) == why
            assert proc.returncode is not None  # reaped
        finally:
            reap(proc)
    assert _dead(int(pid_file.read_text()))  # and the rest of its group killed


@pytest.mark.parametrize(
    ("written", "tail"),
    [
        (b"short", "short"),
        ("é".encode() * 5000, "é" * 4000),
        (b"a" * 10 + b"b" * 4000, "b" * 4000),
        (b"\xff ok", "\ufffd ok"),  # undecodable bytes are replaced, not an error
        ("é".encode()[1:] + b"x", "\ufffdx"),  # so is a character cut in half
    ],
)
def test_the_tail_is_the_last_4000_characters(written: bytes, tail: str) -> None:
    with tempfile.TemporaryFile() as output:
        output.write(written)
        assert sandbox._tail(output) == tail


def test_the_workspace_code_sees_writes_and_reaches_nothing_outside(tmp_path: Path) -> None:
    """test_sandbox.py's probe, reading a file that every copy of the tests has (this one)."""
    root = tmp_path / "w"
    root.mkdir()
    (tmp_path / "outside").mkdir()  # inside the sandbox's own /tmp, the folder is not there
    (tmp_path / "outside" / "secret.txt").write_text("sk-outside")
    probe_outside(root, Path(__file__), lambda: sandbox.run_pytest(root, root / "test_ok.py", 60))


class FakeClock:
    """A clock that moves only by what the run waits for."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def waiter(self, exits_after: int | None) -> Any:
        clock = self

        class Waiter:
            def __init__(self, _proc: object) -> None:
                pass

            def wait(self, seconds: float) -> bool:
                clock.waits.append(seconds)
                assert len(clock.waits) < 10, "the wait never ended"
                clock.now += seconds
                return exits_after is not None and len(clock.waits) > exits_after

            def close(self) -> None:
                pass

        return Waiter


@pytest.mark.parametrize(
    ("size", "exits_after", "why", "waits"),
    [
        (0, None, "timeout", [0.25, 0.25, 0.125]),  # the last slice ends at the deadline
        (2000, 1, "done", [0.25, 0.25]),  # output up to the limit is allowed
        (2001, 1, "output", [0.25]),
    ],
)
def test_the_wait_is_cut_in_slices_up_to_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
    size: int,
    exits_after: int | None,
    why: str,
    waits: list[float],
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(sandbox, "MAX_OUTPUT_BYTES", 2000)
    monkeypatch.setattr(sandbox.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(sandbox, "_Exit", clock.waiter(exits_after))
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    with tempfile.TemporaryFile() as output:
        output.write(b"x" * size)
        output.flush()
        assert sandbox._wait_then_kill(proc, 0.625, output) == why
    assert clock.waits == waits
    assert proc.returncode is not None  # killed if need be, and reaped


def test_without_a_pidfd_a_group_already_gone_is_fine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without pidfd_open the leader is reaped while waiting: killing its group then finds no
    process, and that is not an error."""
    monkeypatch.delattr(os, "pidfd_open")
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    with tempfile.TemporaryFile() as output:
        assert sandbox._wait_then_kill(proc, 30, output) == "done"
    assert proc.returncode == 0


def test_the_pidfd_is_polled_for_its_exit_in_milliseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []

    class Poll:
        def register(self, *args: Any) -> None:
            calls.append(("register", *args))

        def poll(self, *args: Any) -> list[Any]:
            calls.append(("poll", *args))
            return []

    monkeypatch.setattr(sandbox.select, "poll", Poll)
    proc = _started("import time; time.sleep(60)")
    waiter = sandbox._Exit(proc)
    try:
        assert waiter.wait(0.25) is False
        fd = waiter._fd
    finally:
        waiter.close()
        proc.kill()
        proc.wait()
    assert calls == [("register", fd, sandbox.select.POLLIN), ("poll", 250.0)]
