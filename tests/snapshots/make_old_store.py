"""Writes ``state-fed4ec3.sqlite``: runs stored by the release before ``gated_react.state``
became a package, for ``tests/test_state_stored.py`` to read with the code of today.

Run at commit fed4ec3 (0.1.0, unreleased; ``state.py`` still one module), with the source of
that commit first on the path and this checkout's virtualenv::

    git archive fed4ec3 src | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/src .venv/bin/python tests/snapshots/make_old_store.py

It imports nothing from ``tests/`` (the test imports ``summary`` from here), and it refuses
to run on a tree where ``gated_react.state`` is already a package. Each thread stores a part of
the state the others do not, so together they hold every state model:

    finished    an input given as ``RunInput`` (LangGraph stores the model itself), tool calls
                one by one and two in one reply, a malformed reply retried with a reminder, a
                final answer, priced (``spend``); then a second turn from chat ``messages``
                on the same thread
    paused      waits on the approval of ``get_user_billing`` (a ``Question``): resume it
    structured  a final answer fitting ``response_format`` (``structured_response``)
    stopped     ended by its tool-call budget
    extended    a spent budget a human extended (``on_budget="ask"``), then the answer
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel

import gated_react.state
from gated_react import Budget, Policy, Price, build_graph, open_checkpointer, read, resume
from gated_react.state import RunInput
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

STORE = Path(__file__).with_name("state-fed4ec3.sqlite")
GOAL = "User 42 asked: can I get a refund for my subscription now? Answer with the USD amount."
ANSWER = "Yes: the Pro monthly plan was paid 10 days ago, so USD 49.00 is refunded."
APPROVAL = Policy(require_approval=frozenset({"get_user_billing"}))
"""The policy of the paused thread: its resume runs under the same one."""


class Refund(BaseModel):
    """The structured thread's answer."""

    refundable: bool
    usd: float


def calls(*named: tuple[str, dict[str, Any]], tag: str) -> AIMessage:
    """One reply holding these tool calls, with ids fixed so the file is the same each time."""
    tool_calls = [
        {"name": name, "args": args, "id": f"call_{tag}_{n}"}
        for n, (name, args) in enumerate(named)
    ]
    return AIMessage("", tool_calls=tool_calls)


PROFILE = ("get_user_profile", {"user_id": 42})
BILLING = ("get_user_billing", {"user_id": 42})
POLICY = ("search_policy", {"query": "refund pro monthly"})
PAUSED_REPLIES = [calls(PROFILE, tag="p1"), calls(BILLING, tag="p2")]
"""What the paused thread's model said before the question; its resume needs one more reply."""


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def _graph(saver: Any, replies: list[Any], policy: Policy | None = None, **build: Any) -> Any:
    model = ScriptedChatModel(replies=replies)
    return build_graph(model, SUPPORT_TOOLS, policy=policy or Policy(), checkpointer=saver, **build)


def write(saver: Any) -> None:
    """The five threads."""
    replies = [
        calls(PROFILE, tag="f1"),
        calls(BILLING, POLICY, tag="f2"),
        AIMessage(""),  # no action: a format reminder, then another try
        ANSWER,
        "Still USD 49.00.",
    ]
    priced = {"scripted": Price(input=2.5, output=10.0)}  # so ``spend`` holds dollars
    policy = Policy(max_parallel_calls=2, on_invalid_action="retry", prices=priced)
    finished = _graph(saver, replies, policy)
    finished.invoke(RunInput(goal=GOAL), _config("finished"))
    finished.invoke({"messages": [HumanMessage("And the amount again?")]}, _config("finished"))

    _graph(saver, list(PAUSED_REPLIES), APPROVAL).invoke({"goal": GOAL}, _config("paused"))

    replies = [calls(BILLING, tag="s1"), '{"refundable": true, "usd": 49.0}']
    structured = _graph(saver, replies, response_format=Refund)
    structured.invoke({"goal": GOAL}, _config("structured"))

    replies = [calls(PROFILE, tag="b1"), calls(BILLING, tag="b2")]
    stopped = _graph(saver, replies, Policy(budget=Budget(max_tool_calls=1)))
    stopped.invoke({"goal": GOAL}, _config("stopped"))

    replies = [calls(PROFILE, tag="e1"), calls(BILLING, tag="e2"), ANSWER]
    asks = Policy(budget=Budget(max_tool_calls=1), on_budget="ask")
    extended = _graph(saver, replies, asks)
    extended.invoke({"goal": GOAL}, _config("extended"))
    resume(extended, "extended", {"approved": True})


THREADS = ("finished", "paused", "structured", "stopped", "extended")


def _message(message: BaseMessage) -> dict[str, Any]:
    return {"type": message.type, "text": message.text, "id": message.id}


def summary(result: Any) -> dict[str, Any]:
    """A thread's result as JSON, its messages by type, text and id: what the old code read."""
    plain = {key: value for key, value in result.items() if key != "messages"}
    plain["messages"] = [_message(message) for message in result["messages"]]
    return json.loads(json.dumps(plain, sort_keys=True, default=str))


def main() -> None:
    if Path(gated_react.state.__file__).name != "state.py":
        sys.exit("run this with the source of fed4ec3 first on PYTHONPATH (see the docstring)")
    STORE.unlink(missing_ok=True)
    with open_checkpointer(str(STORE)) as saver:
        write(saver)
        read_back = {thread: summary(read(_graph(saver, []), thread)) for thread in THREADS}
    with sqlite3.connect(STORE) as conn:  # one file, no WAL beside it, no free pages
        conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    with sqlite3.connect(STORE) as conn:
        conn.execute("VACUUM")
    conn.close()
    Path(f"{STORE}.locks").unlink(missing_ok=True)  # the thread locks' file, empty
    expected = STORE.with_suffix(".json")
    expected.write_text(json.dumps(read_back, indent=1, sort_keys=True) + "\n")
    print(f"{STORE.name}: {STORE.stat().st_size} bytes; {expected.name}: what fed4ec3 read")


if __name__ == "__main__":
    main()
