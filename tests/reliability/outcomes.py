"""What a faulted run is compared with: the uninterrupted run of the same script, and the one
way a run may end differently (a non-idempotent call whose outcome a fault lost stops instead
of running again). Shared by the store-fault tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import convert_to_messages
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import UnknownThread, read, resume, run
from gated_react._engine.conversation.transcript import calls_shown

from ..support.helpers import REFUND_GOAL
from ..support.openai_server import reply, tool_call
from ..support.scenarios import as_run, graph_for, lines, model_calls_again, said, without_ids

SCRIPTS = {
    "refund": {},  # three idempotent support tools: LangGraph's async durability
    "append": {"tools": "append", "script": "append"},  # not idempotent: sync durability
}


def spec_for(script: str, folder: Path) -> dict[str, Any]:
    extra = {"file": str(folder / "payments.txt")} if script == "append" else {}
    return {**SCRIPTS[script], **extra}


def reference(spec: dict[str, Any]) -> dict[str, Any]:
    """The uninterrupted run (its side effect undone, so the file counts the faulted run's)."""
    out = run(graph_for(spec, InMemorySaver()), REFUND_GOAL, thread_id="reference")
    if spec.get("file"):
        Path(spec["file"]).unlink()
    return out


def check_ending(
    spec: dict[str, Any], out: dict[str, Any], expected: dict[str, Any], lost: int = 1
) -> str:
    """The resumed run ends as the uninterrupted one, or (a non-idempotent call whose outcome
    was lost with the failed write) stops rather than repeat it. Never a second call. A model
    call the fault cost (paid, its reply in no stored checkpoint) is asked again and counted:
    ``lost`` at most (``replies_lost``; one when the fault cut a single write)."""
    if spec.get("file"):
        done = len(lines(Path(spec["file"])))
        assert done <= 1, "a non-idempotent call was repeated"
        if out["stop_reason"] == "tool_outcome_unknown:append_line":
            assert out["history"] == []
            assert done == 1
            return "outcome unknown"
        assert done == 1
    assert as_run(out) == as_run(expected)
    assert 0 <= model_calls_again(out, expected) <= lost, (out["usage"], expected["usage"], lost)
    return "same"


def carry_on(graph: Any, expected: dict[str, Any], thread: str = "t") -> dict[str, Any]:
    """After the fault: resume the thread (its stored steps a prefix of the uninterrupted
    run's); if its very first write failed there is no thread, so the run starts again."""
    try:
        kept = read(graph, thread)["history"]
    except UnknownThread:
        return run(graph, REFUND_GOAL, thread_id=thread)
    assert without_ids(kept) == without_ids(expected["history"])[: len(kept)]
    return resume(graph, thread)


def resumed_as_expected(spec: dict[str, Any], saver: Any, expected: dict[str, Any]) -> str:
    """``carry_on`` on ``saver``'s store, checked by ``check_ending``: how it ended."""
    graph = graph_for(spec, saver)
    lost = replies_lost(graph)
    return check_ending(spec, carry_on(graph, expected), expected, lost)


def replies_lost(graph: Any, thread: str = "t") -> int:
    """The model calls a faulted run paid (its record) whose replies the thread's stored
    messages do not show: at least what a resume asks again (a final answer waits in the step
    in hand until the run finishes, and a pending write the resume applies may hold a reply).
    Under sync durability one at most; under async, as many as LangGraph's background
    checkpoint writes were behind the run when the write failed (they are not waited for: a
    loaded machine lets them lag more than a step)."""
    try:
        kept = read(graph, thread)
    except UnknownThread:
        return 0
    replies = sum(1 for m in kept["messages"] if said(m)[0] == "ai")
    return max(int(kept["usage"]["steps"]) - replies, 0)


class Model:
    """A model server reply chosen by the tool calls done so far (as ``by_progress`` does), which
    runs ``trap()`` once, the first time it is asked for step 2 after ``armed`` is set."""

    def __init__(self, script: list[Any], trap: Any) -> None:
        self.script, self.trap, self.armed, self.sprung = script, trap, False, False

    def __call__(self, request: dict[str, Any]) -> Any:
        done = calls_shown(convert_to_messages(request["messages"]))
        if done == 1 and self.armed and not self.sprung:
            self.sprung = True
            self.trap()
        return self.script[min(done, len(self.script) - 1)]


# The refund scenario as the model server's replies (the CLI talks to it over HTTP).
REFUND = [
    tool_call("get_user_profile", user_id=42),
    tool_call("get_user_billing", user_id=42),
    tool_call("search_policy", query="refund pro monthly"),
    reply("Yes: USD 49.00 is refunded."),
]
