"""``python -m gated_react.workers``: arguments that cannot work are one line and exit 2 before
any worker starts, never a traceback in a worker (or, under ``-n``, a worker replaced for ever)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..support.fleet import children
from ..support.reaping import reap, wait_for

STORE = "postgresql://nobody@127.0.0.1:1/none"  # never reached: the arguments fail first
GRAPH = "tests.support.worker_graphs:refund"


@contextlib.contextmanager
def _listening(free_below: int = 0) -> Iterator[int]:
    """A port something listens on (taken), as another process would hold it, with the
    ``free_below`` ports under it free when it is handed out (other tests run beside this one
    and take ports of their own)."""
    for _ in range(50):
        with socket.socket() as held:
            held.bind(("127.0.0.1", 0))
            held.listen()
            port = int(held.getsockname()[1])
            if all(_free(port - n) for n in range(1, free_below + 1)):
                yield port
                return
    raise AssertionError(f"no port with {free_below} free ports below it")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _stop_tree(proc: subprocess.Popen[bytes]) -> None:
    """The command and any worker it started (each in a session of its own)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGSTOP)  # no worker is started while its workers are found
        for pid in children(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    reap(proc)


def _worker_command(tmp_path: Path, *args: str) -> tuple[int, str]:
    """Exit code and stderr, once it exits or a worker of it has started (or crashed)."""
    err = tmp_path / "stderr"
    with err.open("wb") as sink:
        command = [sys.executable, "-m", "gated_react.workers", "--store", STORE, "--graph", GRAPH]
        proc = subprocess.Popen([*command, *args], stderr=sink)
    try:
        wait_for(
            lambda: (
                proc.poll() is not None
                or "Traceback" in err.read_text()
                or '"event": "worker_' in err.read_text()
            ),
            what="an exit",
        )
    finally:
        _stop_tree(proc)
    return proc.returncode, err.read_text()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--health-port", "99999"], "--health-port 99999: a port is 0 to 65535"),
        (["--health-port", "-1"], "--health-port -1: a port is 0 to 65535"),
        (
            ["-n", "2", "--health-port", "65535"],
            "--health-port 65535: worker-1 would listen on 65536; a port is 0 to 65535",
        ),
    ],
)
def test_a_health_port_that_is_no_port_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], says: str
) -> None:
    code, err = _worker_command(tmp_path, *args)
    assert (code, err) == (2, f"gated-react worker: {says}\n")


@pytest.mark.parametrize("n", ["0", "-3"])
def test_a_concurrency_below_one_is_one_line_and_exit_2(tmp_path: Path, n: str) -> None:
    """``--concurrency 0`` made a worker that said it was ready and never took a job."""
    code, err = _worker_command(tmp_path, "--concurrency", n)
    assert (code, err) == (2, f"gated-react worker: --concurrency {n}: at least one job at once\n")


def test_a_health_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with _listening() as taken:
        code, err = _worker_command(tmp_path, "--health-port", str(taken))
    assert code == 2
    assert err.startswith(f"gated-react worker: --health-port {taken} on 127.0.0.1: ")
    assert "in use" in err
    assert err.count("\n") == 1


def test_a_supervised_workers_port_in_use_stops_the_fleet_before_it_starts(
    tmp_path: Path,
) -> None:
    """``-n 3 --health-port P`` with P + 2 taken: worker-2 would have died and been replaced for
    ever, its siblings serving."""
    with _listening(free_below=2) as taken:
        code, err = _worker_command(tmp_path, "-n", "3", "--health-port", str(taken - 2))
    assert code == 2
    assert err.startswith(f"gated-react worker: --health-port {taken - 2}: worker-2 would ")
    assert f"listen on {taken}" in err
    assert err.count("\n") == 1
    assert "worker_" not in err


def test_a_port_taken_after_the_check_is_one_line_in_the_worker_too() -> None:
    """Between the command's check and the worker's listen another process may take the port:
    the worker then exits 2 with the same line (the supervisor stops, not replaces, it)."""
    import asyncio

    from gated_react.workers.watch import Options, observed

    async def listen(port: int) -> None:
        async with observed("w", Options(health_port=port), stalled_after=30.0):
            pass

    with _listening() as taken, pytest.raises(ValueError, match="port is in use") as refused:
        asyncio.run(listen(taken))
    assert str(refused.value) == f"--health-port {taken} on 127.0.0.1: the port is in use"
