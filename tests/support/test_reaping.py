"""The reaper every process-starting test relies on: a process that still runs is killed with
its process group, its pipes are closed and it is waited for, so nothing is left to warn in a
later test; a wait fails at once when the process it waits on has ended."""

from __future__ import annotations

import gc
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from .mcp_servers import alive
from .reaping import reap, wait_for

GRANDCHILD = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(600)\n"
)


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 60
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_a_running_group_leader_is_killed_with_its_group_and_its_pipes_closed() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", GRANDCHILD],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    grandchild = int(proc.stdout.readline())
    reap(proc)
    assert proc.returncode == -9
    assert proc.stdout.closed
    assert proc.stderr is not None
    assert proc.stderr.closed
    assert _gone(grandchild)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del proc
        gc.collect()  # no ResourceWarning: nothing was left open or running
    reap_twice = subprocess.Popen([sys.executable, "-c", "pass"], stdout=subprocess.PIPE)
    reap(reap_twice)
    reap(reap_twice)  # harmless


def test_a_process_in_our_group_is_killed_alone() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    reap(proc)  # killpg here would have killed the test run itself
    assert proc.returncode == -9


def test_a_wait_fails_at_once_when_the_process_has_ended(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.exit('gave up')"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:  # "ended", not "still no ... after 240 s": it saw the exit
        with pytest.raises(AssertionError, match=r"ended \(1\) before the marker: gave up"):
            wait_for((tmp_path / "never").exists, proc, "the marker")
    finally:
        reap(proc)
