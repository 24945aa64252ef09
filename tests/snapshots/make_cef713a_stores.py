"""Writes the stores of the release before 0.1.0 (``main`` at cef713a, the last commit before
the run's record): ``store-cef713a.sqlite`` and, given a Postgres database, ``store-cef713a.sql``
(its ``pg_dump`` in plain SQL), for ``tests/test_state_stored_cef713a.py`` to read, show and
resume with the code of today. ``store-cef713a.json`` keeps what cef713a itself read of each.

Run with the code of cef713a (its own checkout and virtualenv), from this checkout::

    git worktree add /tmp/oldmain cef713a && cd /tmp/oldmain && make setup
    cd - && /tmp/oldmain/.venv/bin/python tests/snapshots/make_cef713a_stores.py \\
        postgresql://postgres@127.0.0.1:PORT/EMPTY_DATABASE

It refuses to run on code that has the run's record (``gated_react._engine.authority``), and
imports nothing from ``tests/`` (the tests import its names). Each store holds four threads:

    paused   waits on the approval of ``get_user_billing`` (a question from the old gate)
    ok       ended ``success`` after two tool calls, priced (cost in its usage)
    stopped  ended ``max_tool_calls`` by its tool-call budget
    crashed  killed (SIGKILL) inside ``issue_refund``, a call that is not idempotent, after it
             paid: its outcome is unknown, and nothing in the store says it ran
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool

from gated_react import Budget, Policy, Price, build_graph, open_checkpointer, read
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

HERE = Path(__file__).parent
SQLITE = HERE / "store-cef713a.sqlite"
DUMP = HERE / "store-cef713a.sql"
READ = HERE / "store-cef713a.json"
GOAL = "User 42 asked: can I get a refund for my subscription now? Answer with the USD amount."
ANSWER = "Yes: the Pro monthly plan was paid 10 days ago, so USD 49.00 is refunded."
THREADS = ("paused", "ok", "stopped", "crashed")

PAID: list[str] = []
"""Every refund ``issue_refund`` made in this process."""
_HANG: list[Path] = []
"""Set in the child that is killed: the refund pays, writes this file, then hangs."""


@tool
def issue_refund(user_id: int, usd: str) -> str:
    """Refund a user (not idempotent: every call pays)."""
    PAID.append(f"{user_id}\t{usd}")
    if _HANG:
        _HANG[0].write_text(str(os.getpid()))
        threading.Event().wait()  # until the parent kills this process
    return f"refunded USD {usd} to user {user_id}"


TOOLS = [*SUPPORT_TOOLS, issue_refund]
APPROVAL = Policy(require_approval=frozenset({"get_user_billing"}))
PRICED = Policy(prices={"scripted": Price(input=2.5, output=10.0)})
TIGHT = Policy(budget=Budget(max_tool_calls=1))


def calls(name: str, tag: str, **args: Any) -> AIMessage:
    """One reply holding one tool call, its id fixed."""
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{tag}"}])


PROFILE = {"user_id": 42}
SCRIPTS: dict[str, tuple[Policy, list[Any]]] = {
    "paused": (APPROVAL, [calls("get_user_profile", "p1", **PROFILE),
                          calls("get_user_billing", "p2", **PROFILE)]),
    "ok": (PRICED, [calls("get_user_profile", "o1", **PROFILE),
                    calls("get_user_billing", "o2", **PROFILE), ANSWER]),
    "stopped": (TIGHT, [calls("get_user_profile", "s1", **PROFILE),
                        calls("get_user_billing", "s2", **PROFILE)]),
    "crashed": (Policy(), [calls("get_user_profile", "c1", **PROFILE),
                           calls("issue_refund", "c2", user_id=42, usd="49.00")]),
}  # fmt: skip
"""Each thread's policy and its model's replies up to where cef713a left it."""


def graph(saver: Any, thread: str, *more: Any) -> Any:
    """The thread's graph: its policy, its replies, then ``more``."""
    policy, replies = SCRIPTS[thread]
    model = ScriptedChatModel(replies=[*replies, *more])
    return build_graph(model, TOOLS, policy=policy, checkpointer=saver)


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def _crash(url: str, marker: str) -> None:
    """The child: runs ``crashed`` until its refund hangs."""
    _HANG.append(Path(marker))
    with open_checkpointer(url) as saver:
        graph(saver, "crashed").invoke({"goal": GOAL}, _config("crashed"))


def write(url: str) -> dict[str, Any]:
    """The four threads in the store at ``url``; what cef713a reads of each."""
    with open_checkpointer(url) as saver:
        for thread in ("paused", "ok", "stopped"):
            graph(saver, thread).invoke({"goal": GOAL}, _config(thread))
    with tempfile.TemporaryDirectory() as folder:
        marker = Path(folder) / "paid"
        child = multiprocessing.get_context("spawn").Process(target=_crash, args=(url, str(marker)))
        child.start()
        while not marker.exists() and child.is_alive():
            time.sleep(0.05)
        assert marker.exists(), "the crashed run never reached its refund"
        os.kill(int(child.pid or 0), signal.SIGKILL)
        child.join()
    with open_checkpointer(url) as saver:
        return {thread: summary(read(graph(saver, thread), thread)) for thread in THREADS}


def _message(message: BaseMessage) -> dict[str, Any]:
    return {"type": message.type, "text": message.text, "id": message.id}


def summary(result: Any) -> dict[str, Any]:
    """A thread's result as JSON, its messages by type, text and id: what the old code read."""
    plain = {key: value for key, value in result.items() if key != "messages"}
    plain["messages"] = [_message(message) for message in result["messages"]]
    return json.loads(json.dumps(plain, sort_keys=True, default=str))


def _compact(store: Path) -> None:
    """One file, no WAL beside it, no free pages, no locks' file."""
    with sqlite3.connect(store) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    with sqlite3.connect(store) as conn:
        conn.execute("VACUUM")
    conn.close()
    Path(f"{store}.locks").unlink(missing_ok=True)


def restore(url: str) -> None:
    """The Postgres store (``store-cef713a.sql``) loaded into the empty database at ``url``."""
    load = ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(DUMP), url]
    subprocess.run(load, check=True, capture_output=True)


def main(argv: list[str]) -> None:
    if importlib.util.find_spec("gated_react._engine.authority") is not None:
        sys.exit("run this with the code of cef713a (see the docstring)")
    SQLITE.unlink(missing_ok=True)
    read_back = {"sqlite": write(str(SQLITE))}
    _compact(SQLITE)
    if argv:
        read_back["postgres"] = write(argv[0])
        dump = ["pg_dump", "--no-owner", "--no-privileges", "-f", str(DUMP), argv[0]]
        subprocess.run(dump, check=True)
        # \restrict (pg_dump since 15.14) is a meta-command older psql builds refuse: dropped,
        # so the dump loads with any psql
        lines = DUMP.read_text().splitlines(keepends=True)
        DUMP.write_text(
            "".join(x for x in lines if not x.startswith(("\\restrict ", "\\unrestrict ")))
        )
    READ.write_text(json.dumps(read_back, indent=1, sort_keys=True) + "\n")
    sizes = ", ".join(f"{p.name} {p.stat().st_size} bytes" for p in (SQLITE, DUMP, READ))
    print(f"written: {sizes}")


if __name__ == "__main__":
    main(sys.argv[1:])
