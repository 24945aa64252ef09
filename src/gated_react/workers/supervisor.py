"""The supervisor: keeps ``-n`` worker processes alive, and stops them on SIGTERM/SIGINT.

A worker that dies (a signal, a crash, the OOM killer) is reaped and replaced, one line on
stderr saying so (``worker_exited``, in the workers' JSON lines); one that keeps dying soon
after it started waits 1, 2, 4 ... up to ``REPLACE_CAP`` seconds before each replacement. A
worker that exits with 2 (its arguments or graph factory are wrong) is not replaced: the
supervisor stops the others and exits 2. The first SIGTERM or SIGINT stops each worker
gracefully (it finishes the jobs at hand); a second kills them at once. The exit code is 0
only if no worker died: one killed by signal N counts as 128 + N, as in a shell.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from gated_react.workers import log as worker_log
from gated_react.workers.watch import Options, worker_args

REPLACE_CAP = 60.0
"""Seconds: the longest wait before replacing a worker that keeps dying."""
SETTLED = 10.0
"""Seconds a worker must live for its next death to be replaced without waiting."""
CONFIG_ERROR = 2
"""A worker's exit code for bad arguments or a bad graph factory: replacing it cannot help."""
_POLL = 0.2


def worker_command(
    url: str,
    factory: str,
    *,
    concurrency: int = 1,
    burst: bool = False,
    stalled_after: float = 30.0,
) -> list[str]:
    """The command line of one worker process."""
    command = [sys.executable, "-m", "gated_react.workers", "--store", url, "--graph", factory]
    command += ["--stalled-after", str(stalled_after), "--concurrency", str(concurrency)]
    return command + (["--burst"] if burst else [])


def spawn(command: list[str], name: str) -> subprocess.Popen[bytes]:
    """One worker in its own session: a terminal's Ctrl-C reaches the supervisor only, which
    stops each worker once."""
    return subprocess.Popen([*command, "--name", name], start_new_session=True)


def start_workers(
    url: str,
    factory: str,
    processes: int,
    *,
    concurrency: int = 1,
    burst: bool = False,
    stalled_after: float = 30.0,
    observe: Options | None = None,
) -> list[subprocess.Popen[bytes]]:
    """Start ``processes`` worker processes (not supervised); stop them with ``terminate()``
    (they finish the job at hand) and ``wait()``."""
    command = worker_command(
        url, factory, concurrency=concurrency, burst=burst, stalled_after=stalled_after
    )
    observe = observe or Options()
    return [
        spawn([*command, *worker_args(observe, index)], f"worker-{index}")
        for index in range(processes)
    ]


def exit_status(code: int) -> int:
    """A child's return code as a shell shows it: killed by signal N -> 128 + N."""
    return 128 - code if code < 0 else code


@dataclass
class _Slot:
    name: str
    args: list[str] = field(default_factory=list)  # its own (a health port of its own)
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    due: float = 0.0  # when a replacement may start
    pause: float = 0.0  # the wait before the next replacement, doubled while it keeps dying


@dataclass
class Supervisor:
    """``-n`` workers kept alive until stopped; ``run()`` returns the exit code."""

    command: list[str]
    processes: int
    burst: bool = False
    observe: Options = field(default_factory=Options)
    stops: int = 0
    status: int = 0
    slots: list[_Slot] = field(default_factory=list)

    def run(self) -> int:
        self.slots = [
            _Slot(f"worker-{index}", worker_args(self.observe, index))
            for index in range(self.processes)
        ]
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGUSR1, self._pass_on)  # where each worker waits (stacks.py)
        try:
            while True:
                self._tick()  # reap the dead, start the due
                if not self._live() and (self.stops or not self.slots):
                    break
                time.sleep(_POLL)
        finally:
            for slot in self.slots:  # only after a second stop or a crash here
                if slot.proc is not None and slot.proc.poll() is None:
                    slot.proc.kill()
                    slot.proc.wait()
        return self.status

    def _live(self) -> bool:
        return any(slot.proc is not None and slot.proc.poll() is None for slot in self.slots)

    def _tick(self) -> None:
        now = time.monotonic()
        for slot in list(self.slots):
            if slot.proc is not None and slot.proc.poll() is not None:
                self._reap(slot, slot.proc.returncode, now)
            if slot in self.slots and slot.proc is None and not self.stops and now >= slot.due:
                slot.proc, slot.started = spawn([*self.command, *slot.args], slot.name), now

    def _reap(self, slot: _Slot, code: int, now: float) -> None:
        assert slot.proc is not None
        pid, slot.proc = slot.proc.pid, None
        if self.stops and code in (0, -signal.SIGTERM):
            return  # stopped as asked (a worker still starting dies of the SIGTERM itself)
        if code == 0 and self.burst:
            self.processes -= 1  # the queue is empty: this one is done
            self.slots.remove(slot)
            return
        self.status = max(self.status, exit_status(code))
        why = f"died of {signal.Signals(-code).name}" if code < 0 else f"exited {code}"
        if self.stops:
            _said(slot, pid, code, f"{why} while stopping", then="stop")
            return
        if code == CONFIG_ERROR:
            self._stop()
            _said(slot, pid, code, f"{why}: its arguments are wrong; stopping", then="stop")
            return
        slot.pause = 0.0 if now - slot.started >= SETTLED else min(REPLACE_CAP, slot.pause * 2 or 1)
        slot.due = now + slot.pause
        line = f"{why}; replacing it in {slot.pause:g} s"
        _said(slot, pid, code, line, then="replace", retry_in=slot.pause)

    def _on_signal(self, *_: object) -> None:
        self._stop()

    def _pass_on(self, number: int, _: object) -> None:
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is None:
                slot.proc.send_signal(number)

    def _stop(self) -> None:
        self.stops += 1
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is None:
                if self.stops == 1:
                    slot.proc.terminate()  # graceful: the worker finishes the jobs at hand
                else:
                    slot.proc.kill()


def _said(slot: _Slot, pid: int, code: int, what: str, **fields: Any) -> None:
    """One line on stderr, in the workers' format: ``worker_exited`` with the worker's name,
    pid, exit code or signal, what the supervisor does next, and the same as a sentence."""
    died = signal.Signals(-code).name if code < 0 else None
    worker_log.emit(
        "worker_exited",
        slot.name,
        worker_pid=pid,
        exit_code=None if died else code,
        signal=died,
        **fields,
        message=f"{slot.name} (pid {pid}) {what}",
    )
