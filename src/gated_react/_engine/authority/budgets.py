"""Budget checks, named for when they run, and what a spent budget does.

Each check returns a Stop whose message carries the numbers. The limits in force are the
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


def check_before_step(usage: Usage, budget: Budget) -> Stop | None:
    """Run before every model decision: steps, active seconds, tokens, cost. Each check asks
    whether what was spent is under the limit, so a figure no comparison holds for (NaN, in
    a model built without validation) counts as over it."""
    if not usage.steps < budget.max_steps:
        return Stop(
            StopReason.MAX_STEPS,
            message=f"max_steps {budget.max_steps} reached ({usage.steps + 1} requested)",
        )
    if (late := check_seconds(usage, budget)) is not None:
        return late
    if budget.max_tokens is not None and not usage.tokens < budget.max_tokens:
        return Stop(
            StopReason.MAX_TOKENS,
            message=f"max_tokens {budget.max_tokens} reached ({usage.tokens} spent)",
        )
    return check_cost(usage, budget)


def check_doubt(doubted: str | None, budget: Budget) -> Stop | None:
    """Before every model decision, with a store key: a spend record that does not verify
    (``Tally.doubted``) leaves tokens, dollars and seconds unknown; the first of them the
    budget limits stops the run (a human cannot extend a limit nobody can check)."""
    if doubted is None:
        return None
    limits = (
        (StopReason.MAX_TOKENS, budget.max_tokens, ""),
        (StopReason.MAX_COST, budget.max_cost, " USD"),
        (StopReason.MAX_SECONDS, budget.max_seconds, ""),
    )
    for reason, limit, unit in limits:
        if limit is not None and math.isfinite(limit):
            return Stop(reason, message=f"{reason} {limit:g}{unit} cannot be checked: {doubted}")
    return None


LEAST_SECONDS = 0.01
"""The least of a run's time in which a call is started: with less left, no model or tool call
could return (a request sent then is paid for nothing), so the time counts as spent."""


def check_seconds(usage: Usage, budget: Budget) -> Stop | None:
    """Active seconds: before a decision, and before calls run (a resume after kills may find
    them spent, or all but a sliver: less than ``LEAST_SECONDS``)."""
    if not budget.max_seconds - usage.seconds >= LEAST_SECONDS:
        return Stop(
            StopReason.MAX_SECONDS,
            message=f"max_seconds {budget.max_seconds:g} reached "
            f"({usage.seconds:.2f} active seconds spent)",
        )
    return None


def check_cost(usage: Usage, budget: Budget) -> Stop | None:
    """Run before every model decision and every tool call: the dollars spent. A cost that
    became unknown (a reply without token counts, a stored figure that is no amount: see
    ``Usage``) cannot be shown to be under the limit."""
    if budget.max_cost is None:
        return None
    if usage.cost is None:
        return Stop(
            StopReason.MAX_COST,
            message=f"max_cost {budget.max_cost:g} USD cannot be checked: {usage.unpriced}",
        )
    if not usage.cost < budget.max_cost:
        return Stop(
            StopReason.MAX_COST,
            message=f"max_cost {budget.max_cost:g} USD reached ({usage.cost:.6f} USD spent)",
        )
    return None


def check_before_tool(usage: Usage, budget: Budget, tool: str) -> Stop | None:
    """Run in the gate before a call: the run's total, the tool's own cap, the cost."""
    calls, calls_of_tool = usage.tool_calls, usage.per_tool.get(tool, 0)
    if calls + 1 > budget.max_tool_calls:
        return Stop(
            StopReason.MAX_TOOL_CALLS,
            message=f"max_tool_calls {budget.max_tool_calls} reached ({calls + 1} requested)",
        )
    cap = budget.tool_limits.get(tool)
    if cap is not None and calls_of_tool + 1 > cap:
        return Stop(
            StopReason.TOOL_LIMIT,
            tool,
            message=f"tool_limit {tool} {cap} reached ({calls_of_tool + 1} requested)",
        )
    return check_cost(usage, budget)


def check_thread_step(whole: Usage | None, budget: Budget) -> Stop | None:
    """Before a model call: the decisions the thread's runs made together (``whole``, None
    when no limit holds across them). A thread's limit is never extended by a human."""
    limit = budget.thread_max_steps
    if whole is None or limit is None or whole.steps < limit:
        return None
    said = (
        f"thread_max_steps {limit} reached ({whole.steps + 1} requested across the thread's runs)"
    )
    return Stop(StopReason.MAX_STEPS, message=said)


def check_thread_tool(whole: Usage | None, budget: Budget, tool: str) -> Stop | None:
    """Before a call: the calls the thread's runs made together, in all and of ``tool``."""
    if whole is None:
        return None
    across = "across the thread's runs"
    limit = budget.thread_max_tool_calls
    if limit is not None and whole.tool_calls + 1 > limit:
        said = f"thread_max_tool_calls {limit} reached ({whole.tool_calls + 1} requested {across})"
        return Stop(StopReason.MAX_TOOL_CALLS, message=said)
    cap, made = budget.thread_tool_limits.get(tool), whole.per_tool.get(tool, 0)
    if cap is not None and made + 1 > cap:
        said = f"thread_tool_limits {tool} {cap} reached ({made + 1} requested {across})"
        return Stop(StopReason.TOOL_LIMIT, tool, said)
    return None


def over_tool_count(usage: Usage, budget: Budget, tool: str) -> Stop | None:
    """The run's total or the tool's cap, when one more call would exceed it."""
    over = check_before_tool(usage, budget, tool)
    return over if over is not None and over.reason in _TOOL_COUNTS else None


_TOOL_COUNTS = frozenset({StopReason.MAX_TOOL_CALLS, StopReason.TOOL_LIMIT})


def observed(policy: Policy, over: Stop) -> bool:
    """Whether a spent tool budget is answered to the model (``Policy.on_tool_limit``)."""
    return policy.on_limit(over.detail if over.reason is StopReason.TOOL_LIMIT else None) == (
        "observe"
    )


def limit_answer(over: Stop) -> str:
    """What the model is told of a call over a tool budget under ``on_tool_limit="observe"``:
    ``ToolCallLimitMiddleware``'s words, so an app reads what it read under ``create_agent``."""
    if over.reason is StopReason.TOOL_LIMIT:
        return f"Tool call limit exceeded. Do not call '{over.detail}' again."
    return "Tool call limit exceeded. Do not make additional tool calls."


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
