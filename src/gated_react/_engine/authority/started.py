"""A call the run's record says started: answered with what it returned when it finished, else
of unknown outcome when it is not idempotent, where a human decides under approval (run it
again, or say what came of it) and the run stops ``tool_outcome_unknown:<tool>`` otherwise."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import ToolMessage

from gated_react._engine.authority.approval import answered_text, ask, question
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.conversation.chat import result
from gated_react._engine.conversation.transcript import clip
from gated_react.state import Call, Shown, Step
from gated_react.state.calls import canonical_json
from gated_react.stops import Stop, StopReason

if TYPE_CHECKING:  # the parts' type only: deps is built from the modules that use it
    from gated_react._engine.deps import NodeDeps


def progress(records: Sequence[Record]) -> tuple[bool, ToolMessage | None]:
    """Whether the record says the call started, and its result if it finished."""
    started = any(r.kind in (Kind.STARTED, Kind.DONE) for r in records)
    done = next((r for r in reversed(records) if r.kind is Kind.DONE), None)
    if done is None:
        return started, None
    body = done.body
    answer = result(str(body.get("tool")), str(body.get("call")), str(body.get("shown") or ""),
                    ok=bool(body.get("ok")))  # fmt: skip
    return True, answer


def ask_again(deps: NodeDeps, call: Call, step: int) -> Call | ToolMessage | Stop:
    """A call that may have run already: a human decides under approval (run it again, or say
    what came of it), else the run stops ``tool_outcome_unknown``."""
    if call.tool not in deps.policy.require_approval:
        return unknown(deps, call)
    why = f"{call.tool} {_MAY_HAVE_RUN}"
    asked = question("outcome_unknown", call.tool, call.args, step, why,
                     allowed=("approve", "reject", "respond"))  # fmt: skip
    asked["why"] = why + ". Approve to run it again, or respond with what came of it."
    decision = ask(asked)
    if decision.response is not None:
        text = answered_text(decision.response, deps.policy.max_observation_chars, deps.secrets)
        return shown_result(call, Shown(text=text, by_human=True))
    if not decision.approved:
        return unknown(deps, call)
    return call


_NAMED_CHARS = 300
_MAY_HAVE_RUN = (
    "may already have run: the run's record holds its start but not its end (a crash while "
    "it ran, or this step replayed, forked, copied or answered twice)"
)


def unknown(deps: NodeDeps, call: Call) -> Stop:
    """The stop for a call that may have run, saying how a person finds out whether it did."""
    # The call is named with its arguments here: a thread a program ran has no run log, and
    # its trace keeps only their hash.
    named = f"{call.tool}({clip(canonical_json(call.args), _NAMED_CHARS)})"
    if call.tool in deps.keyed:
        check = f"look up idempotency key {call.key} in the system {call.tool} talks to ({named})"
    else:
        check = f"check with the system {call.tool} talks to whether {named} happened"
    said = f"{call.tool} {_MAY_HAVE_RUN}: {check}, then say what you found in a new message"
    return Stop(StopReason.TOOL_OUTCOME_UNKNOWN, call.tool, said)


def shown_result(call: Call, shown: Shown) -> ToolMessage:
    """The result of a call answered without running: by a human, or as the gate answered."""
    return result(call.tool, call.id, shown.text, ok=shown.by_human)


def waiting_keys(old: Step | None, waiting: list[dict[str, Any]]) -> list[str]:
    """The keys and ids of the calls an unfinished run (``old``, its step in hand) left
    waiting, when a new message cuts it short, and its run: the record says whether any of
    them started (by id too: a step held at its question, as a rollback leaves it, has no keys
    yet, though the call may have run) and whether the run has ended already."""
    if not waiting or old is None:
        return []
    ids = {str(call.get("id")) for call in waiting}
    keys = [c.key for c in old.calls if c.key and c.id in ids]
    return [*keys, *sorted(ids), old.run]


def started_calls(
    records: Sequence[Record], old: Step | None, waiting: list[dict[str, Any]]
) -> dict[str, str | None]:
    """Of the calls left ``waiting``, those the record says started, by id: what the model
    was shown of those that finished, None for those whose outcome is unknown. A record found
    by a call's id is this call's only in its run and of its tool (a model names calls
    ``call_1`` in every run), as ``execute`` reads them (``ways._same_call``)."""
    run, keys = (old.run, {c.key for c in old.calls if c.key}) if old else (None, set())
    tools = {str(c.get("id")): c.get("name") for c in waiting}
    found: dict[str, str | None] = {}
    for record in records:
        call = str(record.body.get("call"))
        mine = record.run == run and record.body.get("tool") == tools.get(call)
        if record.key not in keys and not mine:
            continue
        if record.kind is Kind.DONE:
            found[call] = str(record.body.get("shown") or "")
        elif record.kind is Kind.STARTED:
            found.setdefault(call, None)
    return found
