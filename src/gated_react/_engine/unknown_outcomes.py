"""Calls that may have run already, whose outcome the state does not hold: a step resumed
after a crash (the gate had counted its calls, and ``execute`` may have started them), or a
step replayed from a checkpoint the thread has moved past (time travel, a resume sent to an
old question, a fork continued: ``branches``). A tool that is not
idempotent runs again only when a human says so (under ``require_approval``); otherwise the
run stops ``tool_outcome_unknown:<tool>`` with what to check.
"""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig

from gated_react._engine.approval import answered_outcome, ask, question
from gated_react._engine.deps import NodeDeps
from gated_react._engine.langgraph_internals import is_resuming
from gated_react.state import Call, Outcome
from gated_react.stops import Stop, StopReason

CRASHED = "may already have run before the process stopped; its outcome is unknown"
REPLAYED = (
    "may already have run: this step is replayed from an earlier checkpoint of the thread, "
    "which does not hold what happened after it"
)


def may_have_run(config: RunnableConfig, by_gate: bool, branched: bool = False) -> str | None:
    """Why the step's calls may have run already, or None: a step re-run on another branch of
    its thread (``branches``: time travel, a resume sent to an old checkpoint, a fork), or a
    resume of a step whose calls the gate had counted."""
    if branched:
        return REPLAYED
    return CRASHED if by_gate and is_resuming(config) else None


def outcome_unknown(deps: NodeDeps, call: Call, why_unknown: str) -> Stop | Outcome | None:
    """The stop for a call that may have run already; under approval, the human's answer
    instead: run it again (None), or what came of it (an outcome)."""
    why = f"{call.tool} {why_unknown}"
    if call.tool in deps.policy.require_approval:
        allowed = ("approve", "reject", "respond")
        asked = question("outcome_unknown", call.tool, call.args, call.step, why, allowed=allowed)
        asked["why"] = why + ". Approve to run it again, or respond with what came of it."
        decision = ask(asked)
        if decision.response is not None:
            limit = deps.policy.max_observation_chars
            return answered_outcome(decision.response, limit, deps.secrets)
        if decision.approved:
            return None
    return Stop(StopReason.TOOL_OUTCOME_UNKNOWN, call.tool, f"{why}: {_next_steps(deps, call)}")


def _next_steps(deps: NodeDeps, call: Call) -> str:
    """What to do now, in the stop's own message: find out whether it happened, then say so."""
    if call.tool in deps.keyed:
        check = f"look up idempotency key {call.key} in the system {call.tool} talks to"
    else:
        check = (
            f"check with the system {call.tool} talks to whether the call of step {call.step} "
            "happened (gated-react show THREAD lists it with its arguments)"
        )
    return f"{check}, then send a follow-up on this thread that says what you found"
