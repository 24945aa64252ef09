"""What a call is, and what is known of it before the gate checks it: its key on its branch,
whether the run's record holds a permit naming exactly it, whether it started or a human
was asked about it; and the branch's own step and calls (what loop detection compares)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage

from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.conversation.run_steps import run_decisions, run_loop_index
from gated_react._engine.conversation.turns import question_at, question_of
from gated_react._engine.execution.call_keys import LoopIndex, call_key
from gated_react.state import Call, Step
from gated_react.state.calls import canonical_json

if TYPE_CHECKING:  # the parts' type only: deps is built from the modules that use it
    from gated_react._engine.deps import NodeDeps


def key_for(
    deps: NodeDeps, thread: str, run: str, call: Call, seen: LoopIndex, *, text: str | None = None
) -> str:
    """The call's key: the run's n-th call of this tool with these arguments (compared as
    loop detection compares them) on this branch has the same key wherever it is replayed.
    ``text``: the arguments' canonical JSON, when the caller has it already."""
    normalized = deps.policy.loop_detection == "normalized"
    earlier = seen.repeats(call.tool, call.args, "normalized" if normalized else "exact", text)
    where = f"{thread}\n{run}"
    return call_key(where, call.tool, call.args, earlier, normalized=normalized, text=text)


def asked_ids(step: Step, deps: NodeDeps) -> list[str]:
    """The ids of the step's calls a human would be asked about: what the gate looks up in
    the record first (a replayed step's call may have run)."""
    return [c.id for c in step.calls if c.tool in deps.policy.require_approval]


def started(step: Step, records: Sequence[Record]) -> frozenset[str]:
    """Of ``records``, the calls of ``step``'s run that started (same id and tool)."""
    tools = {c.id: c.tool for c in step.calls}
    return frozenset(
        call for r in records
        if r.kind in (Kind.STARTED, Kind.DONE) and r.run == step.run
        and tools.get(call := str(r.body.get("call"))) == r.body.get("tool")
    )  # fmt: skip


def permitted(record: Record | None, call: Call, deps: NodeDeps) -> bool:
    """Whether ``record`` is a valid permit for exactly ``call`` under this graph's policy:
    its signature verifies, and it names this tool with these arguments."""
    if record is None or not record.verified or record.kind is not Kind.PERMIT:
        return False
    body = record.body
    return (
        body.get("call") == call.id
        and body.get("tool") == call.tool
        and body.get("args") == canonical_json(call.args)
        and body.get("policy") == deps.context.policy_hash
        and record.key == call.key
    )


def branch_step(messages: Sequence[BaseMessage], run: str | None = None) -> int:
    """The step the run is on, on this branch: its AI messages that made calls. ``run``: the
    run expected (where its question was found before, only newer messages are read)."""
    at = question_at(messages, question_of(run) if run else None)
    return run_decisions(messages, at) if at is not None else 0


def branch_calls(messages: Sequence[BaseMessage], run: str | None = None) -> LoopIndex:
    """The calls of this run on this branch that reached a result (ran, or were refused and
    shown): what loop detection compares a new call against."""
    at = question_at(messages, question_of(run) if run else None)
    return run_loop_index(messages, at) if at is not None else LoopIndex()
