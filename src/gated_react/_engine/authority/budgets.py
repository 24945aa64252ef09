"""What a spent budget does (the checks themselves are ``limits``').

The limits in force are the
policy's ``Budget`` (frozen) with the extensions humans granted this run (its record);
``Budget.extended`` is the one place they are combined. ``enforce`` runs a check against them: with
``Policy.on_budget="ask"`` and a checkpointer, a spent budget pauses the run on a question in
LangChain's HITL format (approve the proposed extension, edit the limit, or reject: the budget's
own stop) instead of stopping it. decide, validate, gate and observe check budgets through here;
``loop_detected`` is not a budget and is never asked about.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from gated_react._engine.authority.approval import ask, question
from gated_react._engine.authority.ledger import Book, Place
from gated_react._engine.authority.limits import check_before_step
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.conversation.turns import question_of
from gated_react._engine.execution.call_keys import args_hash
from gated_react._engine.langgraph_internals import can_pause
from gated_react.policy import WHOLE_BUDGETS, Budget, Policy
from gated_react.state import Extension, TraceEntry, Usage
from gated_react.stops import Stop, StopReason

if TYPE_CHECKING:
    from gated_react._engine.deps import NodeDeps

BUDGET_DECISIONS = ("approve", "edit", "reject")
"""What a budget question may be answered with (``respond`` means nothing for a budget)."""


def limits_of(policy: Policy, extensions: Sequence[Extension]) -> Budget:
    """The limits a run is held to. Extensions count only under a policy that asks for them
    (``on_budget="ask"``): the state is data an editor controls, and an edit of
    ``State.extensions`` must not raise the limits of a policy that never extends them."""
    return policy.budget.extended(extensions if policy.on_budget == "ask" else ())


def spent_of(stop: Stop, usage: Usage, budget: Budget) -> tuple[float, float] | None:
    """What the run spent of the budget that stopped it, and its limit; None for a stop no
    extension can lift (not a budget, or a cost that is unknown)."""
    found: dict[StopReason, tuple[Any, Any]] = {
        StopReason.MAX_STEPS: (usage.steps, budget.max_steps),
        StopReason.MAX_TOOL_CALLS: (usage.tool_calls, budget.max_tool_calls),
        StopReason.MAX_SECONDS: (usage.seconds, budget.max_seconds),
        StopReason.MAX_TOKENS: (usage.tokens, budget.max_tokens),
        StopReason.MAX_COST: (usage.cost, budget.max_cost),
    }
    if stop.reason is StopReason.TOOL_LIMIT and stop.detail is not None:
        found[stop.reason] = (usage.per_tool.get(stop.detail, 0), budget.tool_limits[stop.detail])
    spent, limit = found.get(stop.reason, (None, None))
    return None if spent is None or limit is None else (float(spent), float(limit))


def proposal(key: str, spent: float, limit: float) -> float:
    """The extension a human is offered: as much again as the limit (at least one more for
    counts), counted from what is spent when that is already past the limit."""
    more = max(spent, limit) + limit
    if key.partition(":")[0] in WHOLE_BUDGETS:
        return float(max(math.ceil(more), int(max(spent, limit)) + 1))
    if key == StopReason.MAX_SECONDS:  # hundredths, as seconds are shown: never below more
        return math.ceil(more * 100) / 100
    return round(more, 6)


@dataclass
class Limits:
    """The limits one node enforces: the policy's, the run's extensions, and those granted
    while this node ran (written back by ``update``)."""

    policy: Policy
    extensions: list[Extension]
    granted: list[Extension] = field(default_factory=list)

    @property
    def budget(self) -> Budget:
        return limits_of(self.policy, [*self.extensions, *self.granted])

    def records(self, thread: str, run: str) -> list[Record]:
        """The records of the extensions granted here (none: nothing)."""
        return [
            Record(thread, run, Kind.EXTENDED, e.budget, e.model_dump(mode="json"))
            for e in self.granted
        ]


def entry(extension: Extension) -> TraceEntry:
    return TraceEntry(
        step=extension.step,
        tool=extension.budget,
        args_hash=args_hash({"limit": extension.limit}),
        ok=True,
        extended=f"{extension.budget} {extension.was:g} -> {extension.limit:g} "
        f"({extension.decision})",
    )


def enforce(
    check: Callable[[Budget], Stop | None],
    held: Limits,
    usage: Usage,
    config: RunnableConfig | None,
    step: int,
) -> Stop | None:
    """``check`` against the limits in force; a spent budget stops the run, or, when the
    policy asks and the run can pause, asks a human, who may extend it (then the next budget
    is checked) or let it stop."""
    while (stop := check(held.budget)) is not None:
        found = spent_of(stop, usage, held.budget)
        asks = held.policy.on_budget == "ask" and config is not None and can_pause(config)
        if not asks or found is None:
            return stop
        granted = extend(stop, *found, step)
        if isinstance(granted, Stop):
            return granted
        held.granted.append(granted)
    return None


def enforce_before_step(held: Limits, usage: Usage, config: RunnableConfig | None) -> Stop | None:
    """``check_before_step`` through ``enforce``: what observe and validate run before the
    next decision."""
    return enforce(
        lambda budget: check_before_step(usage, budget), held, usage, config, usage.steps
    )


def extend(stop: Stop, spent: float, limit: float, step: int) -> Extension | Stop:
    """Ask whether to extend the budget that stopped the run."""
    key = str(stop)
    offered = proposal(key, spent, limit)
    shown = [_number(key, value) for value in (spent, limit, offered)]
    args = dict(zip(("budget", "spent", "limit", "proposed"), [key, *shown], strict=True))
    why = (
        f"{stop.message}: approve to extend it to {offered:g}, edit to set another limit "
        "(args.limit), or reject to stop the run"
    )
    asked = question("budget", key, args, step, why, allowed=BUDGET_DECISIONS)
    asked["answers"] = {
        "approve": {"approved": True},
        "edit": {"approved": True, "args": {"limit": args["proposed"]}},
        "reject": {"approved": False, "reason": "why"},
    }
    decision = ask(asked, partial(_new_limit_refused, key, spent))
    if not decision.approved:
        reason = decision.reason or "no reason given"
        return Stop(stop.reason, stop.detail, f"{stop.message}; a human declined: {reason}")
    edited = decision.args is not None and decision.args.get("limit") != offered
    new = float(decision.args["limit"]) if edited and decision.args else offered
    return Extension(
        budget=key,
        limit=new,
        was=limit,
        spent=spent,
        decision="edit" if edited else "approve",
        step=step,
    )


def _number(key: str, value: float) -> float | int:
    """Counts as whole numbers in the question (``8``, not ``8.0``), seconds in hundredths."""
    if key.partition(":")[0] in WHOLE_BUDGETS:
        return int(value)
    return round(value, 2) if key == StopReason.MAX_SECONDS else value


def _new_limit_refused(key: str, spent: float, args: dict[str, Any]) -> str | None:
    """Why an edited limit cannot be taken: not a number (a whole one for counts), not past
    what is spent, or beside keys a budget question does not take (they would go unread)."""
    others = sorted(set(args) - {"limit"})
    if others:
        return f"args takes only limit, the new limit; not {', '.join(map(repr, others))}"
    limit = args.get("limit")
    if isinstance(limit, bool) or not isinstance(limit, int | float) or not math.isfinite(limit):
        return "args.limit must be a number, the new limit"
    if key.partition(":")[0] in WHOLE_BUDGETS and limit != int(limit):
        return f"args.limit must be a whole number for {key}"
    if limit <= spent:
        return f"the new limit must be above what is spent ({spent:g})"
    return None


def opened_record(place: Place, run: str, deps: NodeDeps) -> Record:
    """The record of what ``run`` runs under (``RunContext``: model, policy and its limits),
    keyed by its question: how a reader finds the run an output answers (``result_of``)."""
    context = deps.context.model_dump(mode="json")
    return place.record(run, Kind.OPENED, question_of(run), **context)


def reopened(book: Book, place: Place, run: str, deps: NodeDeps) -> list[Record]:
    """The run goes on under another context than it recorded (a resume given other limits,
    another policy or model): it is recorded again, so the limits shown are those in force."""
    recorded, now = book.tally.opened, deps.context
    if recorded is None:
        return []
    said = recorded.body
    was = (said.get("policy_hash"), said.get("model"), said.get("base_url"), said.get("protocol"))
    if was == (now.policy_hash, now.model, now.base_url, now.protocol):
        return []
    return [opened_record(place, run, deps)]
