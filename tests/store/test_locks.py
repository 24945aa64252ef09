"""One advancer per thread: the lock a run takes, and how a listing tells a thread is held
without taking its lock (a run starting while ``runs`` looks is not turned away as busy)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gated_react import open_checkpointer
from gated_react.store import locks
from gated_react.store.locks import ThreadBusy, held, thread_lock

from ..support.reaping import PATIENCE, reap

_HOLDER = """
import sys
from gated_react import open_checkpointer
from gated_react.store.locks import thread_lock
with open_checkpointer(sys.argv[1]) as saver, thread_lock(saver, sys.argv[2]):
    print("held", flush=True)
    sys.stdin.readline()
"""


@contextmanager
def _held_by_another_process(url: str, thread: str) -> Iterator[None]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, url, thread], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "held\n"  # waits for the event, not for a time
        yield
        # let go, and wait for it: the holder unlocks before it exits. (Killed, Postgres would
        # drop its session's lock only when the server notices the connection gone, a moment
        # after the process: a check in that moment saw the thread still held.)
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=PATIENCE)
    finally:
        reap(proc)


def test_a_thread_another_process_holds_is_seen_held_and_the_lock_is_never_taken(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a listing took each unfinished thread's lock for an instant, so a ``resume``
    started in that instant was told the thread was busy."""
    with open_checkpointer(store_url) as saver:
        assert not held(saver, "t")
        with _held_by_another_process(store_url, "t"):
            taken: list[str] = []
            monkeypatch.setattr(locks, "_file_lock", lambda *a: taken.append("file"))
            monkeypatch.setattr(locks, "_pg_lock", lambda *a: taken.append("pg"))
            assert held(saver, "t")
            assert not held(saver, "another thread")
            assert taken == []
        monkeypatch.undo()
        assert not held(saver, "t")  # let go when its holder ended
        with thread_lock(saver, "t"):  # and free to take
            assert held(saver, "t")  # this process holds it


def test_a_store_no_run_has_locked_makes_no_lock_file(tmp_path: Path) -> None:
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        assert not held(saver, "t")
    assert not (tmp_path / "runs.sqlite.locks").exists()


def test_a_second_advancer_is_refused_at_once(store_url: str) -> None:
    with (
        open_checkpointer(store_url) as saver,
        _held_by_another_process(store_url, "t"),
        pytest.raises(ThreadBusy, match="being advanced by another run"),
        thread_lock(saver, "t"),
    ):
        pass


_TAKER = """
import sys
from gated_react import open_checkpointer
from gated_react.store.locks import ThreadBusy, thread_lock
with open_checkpointer(sys.argv[1]) as saver:
    try:
        with thread_lock(saver, sys.argv[2]):
            print("taken")
    except ThreadBusy:
        print("busy")
"""


def test_looking_at_other_threads_keeps_this_processs_own_locks(tmp_path: Path) -> None:
    """Closing any descriptor of a file drops every POSIX lock the process holds on it: a
    look that opened and closed the lock file would free the threads this process runs."""
    url = str(tmp_path / "runs.sqlite")
    with open_checkpointer(url) as saver, thread_lock(saver, "mine"):
        assert not held(saver, "another")  # the lock file opened to look
        assert not held(saver, "a third")
        taker = [sys.executable, "-c", _TAKER, url, "mine"]
        said = subprocess.run(taker, capture_output=True, text=True, check=True).stdout
    assert said == "busy\n"
