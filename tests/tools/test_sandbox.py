"""run_tests runs the workspace's own code: it gets a sandbox that shows it nothing outside the
workspace, lets it write nothing outside, has no network, and leaves no process alive."""

from __future__ import annotations

import fcntl
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from gated_react.tools import sandbox
from gated_react.tools.sandbox import RunStopped, SandboxUnavailable
from gated_react.tools.workspace import RunTests, workspace_tools

from ..support.reaping import PATIENCE

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-outside-the-workspace"
# Started by a workspace test in a session of its own (out of reach of a process-group kill),
# holding the test run's output and a lock the host can probe: the lock frees when it dies.
HOLDER = """
import fcntl, pathlib, sys, time
lock = open("held.lock", "w")
fcntl.flock(lock, fcntl.LOCK_EX)
pathlib.Path("ready").touch()
time.sleep(40)
"""
ESCAPE = f"""
import os, pathlib, subprocess, sys, time

def test_escape():
    # Every descriptor pytest holds, the run's original output among them (capture has
    # replaced fds 1 and 2 with its own files by now).
    held = []
    for fd in range(3, 256):
        try:
            os.fstat(fd)
            held.append(fd)
        except OSError:
            pass
    subprocess.Popen([sys.executable, "-c", {HOLDER!r}], start_new_session=True, pass_fds=held)
    while not pathlib.Path("ready").exists():
        time.sleep(0.01)
    time.sleep(float(pathlib.Path("hang_seconds").read_text()))
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text(SECRET)
    return work


def guarded(call: Callable[[], Any], guard: float = PATIENCE) -> Any:
    """``call()`` from a thread; fails the test if it has not returned after ``guard`` s."""
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(call())
        except Exception as exc:
            out.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout=guard)  # a guard against hanging forever, not a timing
    assert not thread.is_alive(), f"the tool had not returned after {guard} s"
    return out[0]


def lock_is_free(path: Path, guard: float = PATIENCE) -> bool:
    """Whether every holder of the lock at ``path`` is dead within ``guard`` s (killing is
    asynchronous: the kernel tears a PID namespace down after the tool returns)."""
    deadline = time.monotonic() + guard
    with path.open("a") as file:
        while True:
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)


def test_a_hung_test_file_is_killed_whole_at_the_timeout(root: Path) -> None:
    (root / "test_escape.py").write_text(ESCAPE)
    (root / "hang_seconds").write_text("600")
    for timeout in (5.0, 20.0, 80.0):  # a loaded machine may take longer to reach the hang
        run_tests = RunTests(root=root, timeout=timeout)
        error = guarded(partial(run_tests.invoke, {"path": "test_escape.py"}))
        if (root / "ready").exists():
            break
    assert isinstance(error, TimeoutError)
    assert str(error).startswith(f"tests did not finish within {timeout:g} s")
    assert (root / "ready").exists()  # the escaping process did start
    assert lock_is_free(root / "held.lock")


def test_a_finished_run_leaves_no_process_behind(root: Path) -> None:
    (root / "test_escape.py").write_text(ESCAPE)
    (root / "hang_seconds").write_text("0")
    _, _, run_tests = workspace_tools(root)
    out = guarded(lambda: run_tests.invoke({"path": "test_escape.py"}))
    assert out["passed"] is True, out
    assert (root / "ready").exists()
    assert lock_is_free(root / "held.lock")


PROBE = """
import json, pathlib, socket

def probe(reads, writes, port):
    report = {"read": [], "wrote": [], "net": "refused"}
    for path in reads:
        try:
            report["read"].append([path, pathlib.Path(path).read_text()[:80]])
        except OSError:
            pass
    for path in writes:
        try:
            pathlib.Path(path).write_text("written from the sandbox")
            report["wrote"].append(path)
        except OSError:
            pass
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        report["net"] = "connected"
    except OSError:
        pass
    pathlib.Path("report.json").write_text(json.dumps(report))
"""


def probe_outside(root: Path, readable: Path, run: Callable[[], dict[str, Any]]) -> None:
    """Run the workspace's tests with ``PROBE`` in their conftest (``run()``, by whatever path
    runs them): they must read ``root``'s sibling ``outside/secret.txt``, ``readable`` and
    /etc/passwd as absent, write nothing outside, and reach no port of the host."""
    outside = root.parent / "outside"
    reads = [outside / "secret.txt", readable, Path("/etc/passwd")]
    writes = [outside / "written.txt", Path(sys.prefix) / "written.txt"]
    assert all(path.read_text() for path in reads)  # all readable here, so the test can fail
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        (root / "conftest.py").write_text(
            PROBE + f"\nprobe({[str(p) for p in reads]!r}, {[str(p) for p in writes]!r}, "
            f"{listener.getsockname()[1]})\n"
        )
        (root / "test_ok.py").write_text("def test_ok():\n    pass\n")
        try:
            out = run()
            leaked = [path for path in writes if path.exists()]
        finally:
            for path in writes:
                path.unlink(missing_ok=True)
    assert out["passed"] is True, out["output"]
    report = json.loads((root / "report.json").read_text())
    assert report == {"read": [], "wrote": [], "net": "refused"}
    assert leaked == []


def test_the_workspace_code_sees_and_changes_nothing_outside(root: Path) -> None:
    _, _, run_tests = workspace_tools(root)
    probe_outside(root, REPO / "README.md", lambda: run_tests.invoke({"path": "test_ok.py"}))


def test_hidden_files_of_the_workspace_are_empty_inside_the_sandbox(root: Path) -> None:
    (root / ".env").write_text(SECRET)
    (root / "app").mkdir()
    (root / "app" / ".env.local").write_text(SECRET)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text(SECRET)
    (root / "test_peek.py").write_text(
        "import pathlib\n\ndef test_peek():\n"
        "    assert pathlib.Path('.env').read_text() == ''\n"
        "    assert pathlib.Path('app/.env.local').read_text() == ''\n"
        "    assert list(pathlib.Path('.git').iterdir()) == []\n"
    )
    _, _, run_tests = workspace_tools(root)
    out = run_tests.invoke({"path": "test_peek.py"})
    assert out["passed"] is True, out["output"]
    assert SECRET not in out["output"]
    assert (root / ".git" / "config").read_text() == SECRET  # hidden, not destroyed


def test_tests_get_a_private_tmp_and_their_own_tmp_path(root: Path, tmp_path: Path) -> None:
    (root / "test_tmp.py").write_text(
        "import os\n\ndef test_tmp(tmp_path):\n"
        "    (tmp_path / 'x.txt').write_text('x')\n"
        "    assert str(tmp_path).startswith('/tmp/')\n"
        f"    assert not os.path.exists({str(tmp_path / 'outside')!r})\n"
    )
    _, _, run_tests = workspace_tools(root)
    out = run_tests.invoke({"path": "test_tmp.py"})
    assert out["passed"] is True, out["output"]


def fake_bwrap(folder: Path, body: str) -> None:
    folder.mkdir()
    (folder / "bwrap").write_text(f"#!/bin/sh\n{body}\n")
    (folder / "bwrap").chmod(0o755)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("", "bubblewrap (bwrap) is not installed"),
        ("echo 'bwrap: No permissions to create new namespace' >&2; exit 1", "No permissions"),
    ],
)
def test_without_a_working_bwrap_run_tests_refuses_and_says_why(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, why: str
) -> None:
    if body:
        fake_bwrap(tmp_path / "bin", body)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    (root / "test_ok.py").write_text(
        f"def test_ok():\n    open({str(root / 'ran')!r}, 'w').close()\n"
    )
    _, _, run_tests = workspace_tools(root)
    with pytest.raises(RuntimeError, match=re.escape(why)) as err:
        run_tests.invoke({"path": "test_ok.py"})
    assert "sandbox=False" in str(err.value)
    assert "\n" not in str(err.value)
    assert not (root / "ran").exists()


def test_the_opt_out_runs_unconfined_and_still_kills_its_process_group(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bwrap-here"))
    (root / "test_out.py").write_text(
        "import pathlib, subprocess, sys, time\n\ndef test_out():\n"
        f"    assert pathlib.Path({str(tmp_path / 'outside' / 'secret.txt')!r}).read_text()\n"
        "    holder = " + repr(HOLDER) + "\n"
        "    subprocess.Popen([sys.executable, '-c', holder])\n"
        "    while not pathlib.Path('ready').exists():\n        time.sleep(0.01)\n"
    )
    _, _, run_tests = workspace_tools(root, sandbox=False)
    out = guarded(lambda: run_tests.invoke({"path": "test_out.py"}))
    assert out["passed"] is True, out["output"]
    assert lock_is_free(root / "held.lock")


def test_a_flood_of_output_is_cut_short(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "MAX_OUTPUT_BYTES", 1_000_000)
    (root / "test_flood.py").write_text(
        "import sys, time\n\ndef test_flood():\n"
        "    for _ in range(10_000):\n        sys.stdout.write('x' * 10_000)\n"
        "    time.sleep(600)\n"
    )
    (root / "pytest.ini").write_text("[pytest]\naddopts = -s\n")  # no capture: straight out
    _, _, run_tests = workspace_tools(root)
    error = guarded(lambda: run_tests.invoke({"path": "test_flood.py"}))
    assert isinstance(error, RuntimeError)
    assert str(error) == "tests wrote more than 1000000 bytes and were killed"


def test_too_many_hidden_entries_to_mask_are_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "MAX_MASKS", 3)
    for i in range(4):
        (root / f".hidden{i}").write_text("")
    (root / "test_ok.py").write_text("def test_ok():\n    pass\n")
    _, _, run_tests = workspace_tools(root)
    with pytest.raises(RuntimeError, match="more than 3 hidden files and folders"):
        run_tests.invoke({"path": "test_ok.py"})
    (root / ".hidden3").unlink()
    assert run_tests.invoke({"path": "test_ok.py"})["passed"] is True


# Its parts one at a time, each message word for word (what `make mutation` found untested).
# The sandbox's parts one at a time, beside the whole runs above: the bwrap probe and its
# messages, the mount plan in its exact order, the masks, the command and environment a run gets,
# the three ways a run ends, and the tail of its output.


ISOLATION = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
POPEN = subprocess.Popen
OPT_OUT = "or pass sandbox=False to workspace_tools to run the tests unconfined"


def probed_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "bwrap").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "calls"}\n{body}\n')
    (folder / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setattr(sandbox, "_working", set())
    return folder / "bwrap"


def test_a_working_bwrap_is_probed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bwrap = probed_bwrap(tmp_path, monkeypatch, "exit 0")
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
    bwrap = probed_bwrap(tmp_path, monkeypatch, body)
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
    bwrap = probed_bwrap(tmp_path, monkeypatch, "exit 0")
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
