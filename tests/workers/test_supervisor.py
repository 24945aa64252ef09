"""The supervisor keeps N workers: a dead one is reaped and replaced (with backoff while it keeps
dying) and logged; a worker killed by a signal makes the exit code non-zero; SIGTERM drains,
a second SIGTERM stops at once; a worker with wrong arguments stops the fleet with 2.

The workers here are small real processes (``python -c``) that behave as workers do on
signals, so the supervisor is tested without a store; ``tests/test_workers.py`` and the chaos
test run it with real workers on Postgres.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ..support.fleet import children
from ..support.procs import WAIT, wait_until

GRACEFUL = "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
WORKER = GRACEFUL + "open(sys.argv[1], 'a').write('up\\n')\nwhile True: time.sleep(1)\n"
DRAINS_FOR_EVER = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
DRAINS_FOR_EVER += (
    "open(__import__('sys').argv[1], 'a').write('up\\n')\nwhile True: time.sleep(1)\n"
)
CRASHES = "raise SystemExit(3)\n"
WRONG_ARGUMENTS = "raise SystemExit(2)\n"


class Supervised:
    """A supervisor of ``count`` copies of ``script`` in a child process; stderr in a file."""

    def __init__(self, tmp: Path, script: str, count: int, *, burst: bool = False) -> None:
        tmp.mkdir()
        self.ups = tmp / "ups"
        self.err = tmp / "supervisor.err"
        command = [sys.executable, "-c", script, str(self.ups)]
        code = "import sys\nfrom gated_react.workers.supervisor import Supervisor\n"
        code += f"sys.exit(Supervisor({command!r}, {count}, burst={burst}).run())\n"
        with self.err.open("wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", code], stderr=err)

    def workers(self) -> list[int]:
        return children(self.proc.pid)

    def started(self) -> int:
        return len(self.ups.read_text().splitlines()) if self.ups.exists() else 0

    def log(self) -> str:
        return self.err.read_text()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            for pid in self.workers():
                os.kill(pid, signal.SIGKILL)
            self.proc.wait(WAIT)


Start = Callable[..., Supervised]


@pytest.fixture
def supervise(tmp_path: Path) -> Iterator[Start]:
    started: list[Supervised] = []

    def start(script: str, count: int, *, burst: bool = False) -> Supervised:
        folder = tmp_path / f"fleet-{len(started)}"
        started.append(Supervised(folder, script, count, burst=burst))
        return started[-1]

    yield start
    for fleet in started:
        fleet.close()


def test_a_killed_worker_is_replaced_logged_and_counted_in_the_exit_code(supervise: Start) -> None:
    fleet = supervise(WORKER, 3)
    wait_until(lambda: fleet.started() == 3 and len(fleet.workers()) == 3)
    victim = fleet.workers()[0]
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: fleet.started() == 4 and len(fleet.workers()) == 3)
    assert victim not in fleet.workers()
    assert re.search(
        rf"worker-\d \(pid {victim}\) died of SIGKILL; replacing it in [01] s", fleet.log()
    )
    fleet.proc.terminate()
    assert fleet.proc.wait(WAIT) == 128 + signal.SIGKILL
    assert fleet.workers() == []
    (line,) = [json.loads(text) for text in fleet.log().splitlines()]  # one line per death
    assert line["event"] == "worker_exited"
    assert (line["worker_pid"], line["signal"], line["then"]) == (victim, "SIGKILL", "replace")
    assert "exit_code" not in line


def test_a_worker_that_keeps_dying_is_replaced_with_growing_pauses(supervise: Start) -> None:
    fleet = supervise(CRASHES, 1)
    wait_until(lambda: "replacing it in 4 s" in fleet.log())
    pauses = re.findall(r"exited 3; replacing it in (\d+) s", fleet.log())
    assert pauses[:3] == ["1", "2", "4"]
    fleet.proc.terminate()
    assert fleet.proc.wait(WAIT) == 3


def test_sigterm_drains_and_a_second_sigterm_stops_at_once(supervise: Start) -> None:
    fleet = supervise(DRAINS_FOR_EVER, 2)
    wait_until(lambda: fleet.started() == 2 and len(fleet.workers()) == 2)
    fleet.proc.terminate()
    with pytest.raises(subprocess.TimeoutExpired):  # the workers are still draining
        fleet.proc.wait(1.0)
    assert len(fleet.workers()) == 2
    fleet.proc.terminate()
    assert fleet.proc.wait(WAIT) == 128 + signal.SIGKILL
    assert fleet.workers() == []


def test_a_graceful_stop_exits_0(supervise: Start) -> None:
    fleet = supervise(WORKER, 2)
    wait_until(lambda: fleet.started() == 2 and len(fleet.workers()) == 2)
    fleet.proc.send_signal(signal.SIGINT)
    assert fleet.proc.wait(WAIT) == 0
    assert fleet.log() == ""


def test_wrong_arguments_stop_the_fleet_with_2(supervise: Start) -> None:
    fleet = supervise(WRONG_ARGUMENTS, 3)
    assert fleet.proc.wait(WAIT) == 2
    assert "exited 2: its arguments are wrong; stopping" in fleet.log()
    assert "replacing" not in fleet.log()


def test_in_burst_mode_a_worker_done_is_not_replaced(supervise: Start) -> None:
    """Each worker that found the queue empty exits 0; the supervisor then exits 0 without
    starting any other (it once started one on the slot it had just let go, and left it)."""
    fleet = supervise("import sys\nopen(sys.argv[1], 'a').write('up\\n')\n", 2, burst=True)
    assert fleet.proc.wait(WAIT) == 0
    time.sleep(1.0)  # a worker started by mistake would have said so by now
    assert fleet.started() == 2
    assert fleet.log() == ""


TELLS = (
    GRACEFUL + "signal.signal(signal.SIGUSR1, lambda *_: open(sys.argv[1], 'a').write('told\\n'))\n"
    "open(sys.argv[1], 'a').write('up\\n')\nwhile True: time.sleep(1)\n"
)


def test_sigusr1_to_the_supervisor_reaches_every_worker_and_stops_none(supervise: Start) -> None:
    """``kill -USR1 <supervisor>``: each worker shows where it waits (``workers/stacks.py``).
    Before, the signal's default ended the supervisor and left its workers running on."""
    fleet = supervise(TELLS, 3)
    wait_until(lambda: fleet.started() == 3 and len(fleet.workers()) == 3)
    workers = fleet.workers()
    os.kill(fleet.proc.pid, signal.SIGUSR1)
    wait_until(lambda: fleet.ups.read_text().count("told") == 3)
    assert fleet.proc.poll() is None
    assert fleet.workers() == workers
