"""``kill -USR1`` on a worker writes every thread's stack and every task's to its standard
error, and the worker goes on: a thread blocked in a call that never returns and a task
waiting on an event both show where they wait."""

from __future__ import annotations

import subprocess
import sys

from ..support.reaping import PATIENCE

CHILD = """
import asyncio, os, signal, threading
from gated_react.workers import stacks

def blocked_for_good(release):
    release.wait()

async def waiting_here(event):
    await event.wait()

async def main():
    shown = asyncio.get_running_loop().create_future()
    told = stacks.tasks
    stacks.tasks = lambda: (told(), shown.set_result(None))  # when the loop has written them
    release, event = threading.Event(), asyncio.Event()
    with stacks.showing():
        threading.Thread(target=blocked_for_good, args=(release,), name="stuck").start()
        waiting = asyncio.create_task(waiting_here(event), name="waiting-task")
        os.kill(os.getpid(), stacks.SIGNAL)
        await shown
    event.set()
    await waiting
    release.set()
    assert signal.getsignal(stacks.SIGNAL) is signal.SIG_DFL  # the block put back what it found
    print("went on")

asyncio.run(main())
"""


def test_sigusr1_shows_where_each_thread_and_task_waits() -> None:
    child = [sys.executable, "-c", CHILD]
    done = subprocess.run(child, capture_output=True, text=True, timeout=PATIENCE, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "went on\n"
    err = done.stderr
    assert "Current thread" in err  # faulthandler's dump, every thread
    assert "in blocked_for_good" in err
    assert "asyncio tasks:" in err
    assert "Stack for <Task pending name='waiting-task'" in err
    assert "in waiting_here" in err
