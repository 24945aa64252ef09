"""The processes a test starts end with the test, on every path, and waits that outlast a loaded
machine.

A ``Popen`` that is garbage-collected while its process runs, or with its pipes open, warns
(``ResourceWarning``), and with warnings as errors the warning fails whichever test happens to
be running then: often a later, unrelated one. So every process is reaped where it is
started (``reap`` in a ``finally`` or a fixture's teardown), killed first if it still runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

PATIENCE = 240.0
"""Seconds a test waits for a process to get somewhere before it gives up. Far more than any
step takes on a 2-core machine at a load average of 8 (a CLI start with its sandboxed pytest
took over 60 s there), so it is reached only when something is wrong; a healthy test waits for
the event itself, never for this."""


def reap(proc: subprocess.Popen[Any]) -> None:
    """End ``proc`` if it still runs (its whole process group when it leads one: the CLI's
    sandboxes and servers go with it), wait for it, and close its pipes."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
    pipes = [pipe for pipe in (proc.stdin, proc.stdout, proc.stderr) if pipe is not None]
    if any(not pipe.closed for pipe in pipes):
        try:
            proc.communicate(timeout=PATIENCE)  # drains and closes them
        except (subprocess.TimeoutExpired, ValueError):  # a grandchild holds one open
            for pipe in pipes:
                pipe.close()
    proc.wait()


def wait_for(
    condition: Callable[[], bool], proc: subprocess.Popen[Any] | None = None, what: str = ""
) -> None:
    """Until ``condition()`` holds; fails at once when ``proc`` ended first (nothing more can
    happen), else after ``PATIENCE`` seconds."""
    deadline = time.monotonic() + PATIENCE
    while not condition():
        if proc is not None and proc.poll() is not None:
            said = ""
            with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
                out, err = proc.communicate(timeout=10)
                said = f"{str(err or '')[-1500:]} (stdout: ...{str(out or '')[-500:]})"
            raise AssertionError(f"the process ended ({proc.returncode}) before {what}: {said}")
        if time.monotonic() > deadline:
            raise AssertionError(f"still no {what} after {PATIENCE:g} s")
        time.sleep(0.05)
