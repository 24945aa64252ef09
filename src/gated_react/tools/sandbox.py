"""pytest on one workspace file inside a bubblewrap sandbox, killed whole at its timeout.

``run_tests`` runs the workspace's own code (its conftest.py, its tests), so that code gets a
read-only view of the system's programs and the Python installation only, the workspace
read-write with its hidden entries masked, a private /tmp, no network, no capabilities and a PID
namespace of its own: killing the sandbox kills every process the tests started, even one that
called setsid. Output goes to an unnamed temporary file, not a pipe, so nothing left behind can
keep the caller waiting for the end of it. Without a working ``bwrap`` the run is refused,
unless the caller opted out (``sandbox=False``): then the tests run with the caller's rights in
a process group of their own, killed at the end.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from gated_react.errors import GatedReactError, one_line

MAX_TEST_OUTPUT = 4000
MAX_OUTPUT_BYTES = 16_000_000
MAX_MASKS = 1000
# Variables a test subprocess may see: nothing that could carry a secret.
_SAFE_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "PYTHONPATH", "SYSTEMROOT")
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ISOLATION = ("--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL")
_POLL_SECONDS = 0.25
_OPT_OUT = "or pass sandbox=False to workspace_tools to run the tests unconfined"
_working: set[str] = set()  # bwrap binaries that have created a sandbox in this process


class SandboxUnavailable(GatedReactError, RuntimeError):
    """bubblewrap is missing or cannot create namespaces here; the tests were not run."""


class RunStopped(GatedReactError, RuntimeError):
    """The tests were not run, or were killed, for a reason other than the timeout."""


class RunTimedOut(GatedReactError, TimeoutError):
    """The tests did not finish within the timeout and were killed."""


def run_pytest(root: Path, target: Path, timeout: float, *, sandbox: bool = True) -> dict[str, Any]:
    """pytest on ``target`` with the workspace ``root`` as working directory."""
    command = [sys.executable, "-m", "pytest", str(target), "-q", "-p", "no:cacheprovider"]
    env = {key: os.environ[key] for key in _SAFE_ENV if key in os.environ}
    with tempfile.TemporaryFile() as output, tempfile.NamedTemporaryFile() as empty:
        if sandbox:
            command = [*bwrap_prefix(root, Path(empty.name)), *command]
            env["TMPDIR"] = "/tmp"  # the sandbox's own /tmp; the caller's may not be visible
        proc = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        why = _wait_then_kill(proc, timeout, output)
        if why == "timeout":
            raise RunTimedOut(f"tests did not finish within {timeout:g} s and were killed")
        if why == "output":
            raise RunStopped(f"tests wrote more than {MAX_OUTPUT_BYTES} bytes and were killed")
        return {
            "exit_code": proc.returncode,
            "passed": proc.returncode == 0,
            "output": _tail(output),
        }


def bwrap_prefix(root: Path, empty: Path) -> list[str]:
    """The bwrap command line that runs a command confined to ``root``; ``empty`` is an empty
    file shown in place of every hidden file of the workspace."""
    bwrap = _bwrap()
    return [bwrap, *_ISOLATION, *_mounts(root, empty), "--chdir", str(root), "--"]


def _bwrap() -> str:
    """A bwrap that works here; SandboxUnavailable with the reason otherwise."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "run_tests runs the workspace's code in a sandbox and bubblewrap (bwrap) is not "
            f"installed: install it (Debian/Ubuntu: apt-get install bubblewrap) {_OPT_OUT}"
        )
    if bwrap not in _working:
        probe = [bwrap, *_ISOLATION, "--ro-bind", "/", "/", sys.executable, "-c", ""]
        try:
            done = subprocess.run(probe, check=False, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise _broken(bwrap, str(exc)) from None
        if done.returncode != 0:
            raise _broken(bwrap, done.stderr or f"exit code {done.returncode}")
        _working.add(bwrap)
    return bwrap


def _broken(bwrap: str, why: str) -> SandboxUnavailable:
    return SandboxUnavailable(
        f"run_tests runs the workspace's code in a sandbox and {bwrap} cannot create one here "
        f"({one_line(why)[:200]}): allow unprivileged user namespaces {_OPT_OUT}"
    )


def _mounts(root: Path, empty: Path) -> list[str]:
    """bwrap's mount arguments, each folder before anything inside it so that it lands on top.

    Order among equals: system, workspace, masks of hidden entries, Python (a virtualenv in a
    hidden folder of the workspace must show through its mask).
    """
    planned: list[tuple[int, int, list[str]]] = [(1, 0, ["--tmpfs", "/tmp"])]
    for path in _SYSTEM:
        if os.path.islink(path):  # /lib -> usr/lib on merged-/usr systems
            planned.append((1, 0, ["--symlink", os.readlink(path), path]))
        elif os.path.isdir(path):
            planned.append((1, 0, ["--ro-bind", path, path]))
    planned.append((len(root.parts), 1, ["--bind", str(root), str(root)]))
    planned += [(len(Path(mask[-1]).parts), 2, mask) for mask in _masks(root, empty)]
    planned += [(len(Path(path).parts), 3, ["--ro-bind", path, path]) for path in _python()]
    planned.sort(key=lambda item: item[:2])
    return ["--dev", "/dev", "--proc", "/proc", *(arg for *_, args in planned for arg in args)]


def _python() -> list[str]:
    """The interpreter's prefixes and the virtualenv, except what /usr already shows."""
    paths = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    paths.add(str(Path(sys.executable).resolve().parent))
    shown = [path for path in paths if Path(path).is_dir() and Path(path).parts[1:2] != ("usr",)]
    return sorted(path for path in shown if path != "/")


def _masks(root: Path, empty: Path) -> list[list[str]]:
    """An empty folder or file over every hidden entry of the workspace (``.env``, ``.git``)."""
    masks: list[list[str]] = []
    for current, dirs, files in os.walk(root):  # symlinked folders are not followed
        for name in (name for name in [*dirs, *files] if name.startswith(".")):
            path = os.path.join(current, name)
            if os.path.islink(path):  # its target is masked, or shown anyway
                continue
            blank = ["--ro-bind", str(empty), path]
            masks.append(["--tmpfs", path] if os.path.isdir(path) else blank)
        dirs[:] = [name for name in dirs if not name.startswith(".")]
        if len(masks) > MAX_MASKS:
            raise RunStopped(
                f"the workspace has more than {MAX_MASKS} hidden files and folders to hide "
                "from the tests; the tests were not run"
            )
    return masks


def _wait_then_kill(proc: subprocess.Popen[bytes], timeout: float, output: IO[bytes]) -> str:
    """Wait for the run; kill its process group (and with it the sandbox) either way before
    reaping the leader, so the group's id cannot have been reused. Returns why it ended:
    ``done``, ``timeout`` or ``output``."""
    deadline = time.monotonic() + timeout
    waiter = _Exit(proc)
    try:
        why = "done"
        while not waiter.wait(min(_POLL_SECONDS, max(0.0, deadline - time.monotonic()))):
            if os.fstat(output.fileno()).st_size > MAX_OUTPUT_BYTES:
                why = "output"
                break
            if time.monotonic() >= deadline:
                why = "timeout"
                break
    finally:
        waiter.close()
        with contextlib.suppress(ProcessLookupError):  # the whole group already gone
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return why


class _Exit:
    """Waits for a process to exit without reaping it (a pidfd where Linux has one)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc
        self._fd = os.pidfd_open(proc.pid) if hasattr(os, "pidfd_open") else None
        self._poll = select.poll()
        if self._fd is not None:
            self._poll.register(self._fd, select.POLLIN)

    def wait(self, seconds: float) -> bool:
        if self._fd is not None:
            return bool(self._poll.poll(seconds * 1000))
        try:
            self._proc.wait(seconds)  # reaps: the group id is then only very unlikely reused
        except subprocess.TimeoutExpired:
            return False
        return True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _tail(output: IO[bytes]) -> str:
    """The last MAX_TEST_OUTPUT characters written (four bytes per character at most)."""
    size = os.fstat(output.fileno()).st_size
    output.seek(max(0, size - 4 * MAX_TEST_OUTPUT))
    return output.read().decode("utf-8", errors="replace")[-MAX_TEST_OUTPUT:]
