"""The gate's checks, in one place: budgets, the allowlist, loop detection and a human's
approval, in that order. ``gate`` runs them on every call the model proposes; ``execute`` runs
them again on a call that has no valid permit (an edit, a fork under another policy, a resume
in a process that cannot check the permit's signature), as if the model had just proposed it.

Each call admitted leaves a permit in the run's record (exactly this tool, with exactly these
arguments, under this policy, by this rule, with the human's answer where one was asked); a
call the model is shown refused leaves a ``refused`` record. Both count against the budgets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, ToolCall
from langchain_core.runnables import RunnableConfig

from gated_react._engine.authority.approval import answered_text, ask, per_call, question
from gated_react._engine.authority.budgets import Limits, enforce
from gated_react._engine.authority.known import branch_calls, branch_step, key_for
from gated_react._engine.authority.ledger import Book, Place
from gated_react._engine.authority.limits import (
    check_before_tool,
    check_thread_tool,
    limit_answer,
    observed,
    over_tool_count,
)
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.authority.spend import identity
from gated_react._engine.execution.call_keys import LoopIndex, args_hash, loop_key, short_hash
from gated_react._engine.execution.tool_args import check_args
from gated_react._engine.langgraph_internals import can_pause, graph_state, runtime_of
from gated_react.errors import MiddlewareFailed
from gated_react.redact import redact
from gated_react.state import Call, Shown, Step, Usage
from gated_react.state.calls import canonical_json
from gated_react.stops import Stop, StopReason

Decided = tuple[Call, dict[str, Any]] | Call | Stop
"""A human's decision about a call: it approved (maybe edited) with the answer, the call
answered in place of the tool, or the stop the answer causes."""

if TYPE_CHECKING:  # the parts' type only: deps is built from the modules that use it
    from gated_react._engine.deps import NodeDeps


@dataclass
class Gatekeeper:
    """One pass of the gate's checks over calls of one run, counting as it admits."""

    deps: NodeDeps
    config: RunnableConfig
    thread: str
    run: str
    usage: Usage
    """The run's spend from its record, with the calls admitted in this pass."""
    whole: Usage | None
    """The thread's, every run's, counted alike; None when no limit holds across its runs."""
    held: Limits
    seen: LoopIndex
    """This branch's calls in this run (from its conversation), with those admitted now."""
    counted: Mapping[str, str]
    """The calls the record counts (``spend.identity``; the run's tally, read only): one
    checked again (after a crash, in a replay) is not counted, nor held to the budgets, twice."""
    admitted: set[str] = field(default_factory=set)
    """The calls this pass counted (``spend.identity``), beside those of ``counted``."""
    asked: frozenset[str] = frozenset()
    """The calls the record says a human was asked about (``spend.identity``)."""
    asking: list[Record] = field(default_factory=list)
    """The ``asked`` records of this pass: written even when it pauses on the question."""
    messages: Sequence[BaseMessage] = ()
    """This branch's conversation (what a reviewer's ``when`` and description read)."""
    step: int = 0
    """The step on this branch (its decisions that made calls): what a question and a record
    say the call belongs to, the same wherever the branch is replayed."""
    records: list[Record] = field(default_factory=list)
    ran: frozenset[str] = frozenset()
    """Calls (by id) the run's record says started: execute answers them from the record, or
    asks whether they ran; the gate asks no approval of them again."""
    reviewed: list[bool] = field(default_factory=list)
    """Each human answer taken in this pass: True for a call approved (as proposed or
    edited), False for one the human rejected or answered in place of the tool."""

    def admit(self, call: Call, *, ask_here: bool = True) -> Call | Stop:
        """``call`` admitted (with its key, and edited arguments if a human edited them), or
        settled with what the model is shown instead (``shown``), or the stop it causes.
        ``ask_here=False``: a call under approval is left to a question asked after (about
        a call that may already have run)."""
        if call.id in self.ran:
            return call.model_copy(update={"key": self.key_for(call)})
        text = canonical_json(call.args)  # written once: each check below hashes it
        settled = self._checked(call, text)
        if settled is not None:
            return settled
        answer: dict[str, Any] | None = None
        decided = self._reviewed(call, ask_here)
        if decided is not None:
            self.reviewed.append(isinstance(decided, tuple))
            if not isinstance(decided, tuple):
                return decided
            if decided[0] is not call:  # a human's edit: other arguments
                text = canonical_json(decided[0].args)
            call, answer = decided
        asked_after = call.tool in self.deps.policy.require_approval and not ask_here
        rule = "approval" if answer else "asked after" if asked_after else "allow"
        return self._permit(call, rule, answer, text)

    def _checked(self, call: Call, text: str) -> Call | Stop | None:
        """The budgets, the allowlist and loop detection: the stop, the call settled with what
        the model is shown, or None when it passes (``text``: the arguments' canonical JSON)."""
        deps, name = self.deps, call.tool
        if not self._counts(self._what(call, text)):
            over = self._over(call)
            if over is not None:
                return over
        refusal = refuse(deps, name)
        if refusal is not None:
            return self._refused(call, refusal)
        earlier = self.seen.repeats(name, call.args, deps.policy.loop_detection, text)
        if not earlier:
            return None
        if earlier > deps.policy.repeat_reminders:
            return loop(name)
        return self._shown(call, Shown(text=_REMIND.format(name), error=_LOOP))

    def _over(self, call: Call) -> Call | Stop | None:
        """A spent budget: the call answered "limit exceeded" (a tool count, the run's or
        the thread's, under ``on_tool_limit="observe"``), or the stop (after a human, under
        ``on_budget="ask"``, for the run's budgets)."""
        usage, name, budget = self.usage, call.tool, self.held.budget
        thread = check_thread_tool(self.whole, budget, name)
        spent = thread or over_tool_count(usage, budget, name)
        if spent is not None and observed(self.deps.policy, spent):
            return self._shown(call, Shown(text=limit_answer(spent), error=str(spent)))
        if thread is not None:  # a thread's limit is never extended by a human
            return thread
        return enforce(lambda budget: check_before_tool(usage, budget, name), self.held, usage,
                       self.config, usage.steps)  # fmt: skip

    def _reviewed(self, call: Call, ask_here: bool) -> Decided | None:
        """A human's decision about a call under approval, or None when nobody is asked."""
        deps = self.deps
        try:
            if not (call.tool in deps.policy.require_approval and ask_here and self._asks(call)):
                return None
            return self._approve(call) if can_pause(self.config) else unavailable(call.tool)
        except MiddlewareFailed as exc:  # a review's own when or description raised
            return Stop(StopReason.MIDDLEWARE_ERROR, exc.name, redact(str(exc), *deps.secrets))

    def _approve(self, call: Call) -> Decided:
        """Ask a human about ``call``: it as approved (maybe edited), the call they answered in
        place of the tool, or the stop their answer causes."""
        deps, name = self.deps, call.tool
        asked = question("approval", name, call.args, self.step, self._why(call),
                         allowed=deps.policy.decisions_for(name))  # fmt: skip
        body = {"call": call.id, "tool": name, "args_hash": args_hash(call.args)}
        self.asking.append(Record(self.thread, self.run, Kind.ASKED, self.key_for(call), body))
        review = deps.reviews.get(name)
        if review is not None and review.per_call:
            asked = per_call(asked, call.id)
        decision = ask(asked, partial(check_args, deps.tools[name]))
        if decision.response is not None:
            text = answered_text(decision.response, deps.policy.max_observation_chars, deps.secrets)
            return self._shown(call, Shown(text=text, by_human=True))
        if not decision.approved:
            return self._rejected(call, decision.reason)
        answer = {"decision": "approve", "question": asked["why"]}
        if decision.args is None or decision.args == call.args:
            return call, answer
        if self.seen.repeats(name, decision.args, deps.policy.loop_detection):
            return loop(name)
        edited = call.model_copy(update={"args": decision.args, "proposed": call.args})
        return edited, answer | {"decision": "edit"}

    def _asks(self, call: Call) -> bool:
        """Whether a call under approval is asked about: always, unless its review's ``when``
        says this one needs no human."""
        review = self.deps.reviews.get(call.tool)
        if review is None or review.when is None or self._what(call) in self.asked:
            return True  # asked before: its answer is taken, whatever ``when`` says now
        return review.needed(self._request(call))

    def _why(self, call: Call) -> str:
        review = self.deps.reviews.get(call.tool)
        if review is None:
            return f"policy requires a human to approve every {call.tool} call"
        tool_call = {"name": call.tool, "args": call.args, "id": call.id, "type": "tool_call"}
        return review.describe(tool_call, self._state(), runtime_of(self.config))

    def _state(self) -> dict[str, Any]:
        """The state as a reviewer's ``description`` and ``when`` read it, as under
        ``create_agent``: the conversation and the app's fields."""
        from gated_react._engine.execution.injection import shown_state

        state = shown_state(graph_state(self.config))
        return {**(state if isinstance(state, dict) else {}), "messages": list(self.messages)}

    def _request(self, call: Call) -> Any:
        """The call as a reviewer's ``when`` predicate reads it (LangChain's ToolCallRequest)."""
        from langgraph.prebuilt.tool_node import ToolCallRequest

        from gated_react._engine.execution.injection import tool_runtime

        tool_call = ToolCall(name=call.tool, args=call.frozen(), id=call.id, type="tool_call")
        runtime = tool_runtime(None, tool_call, self.config, self.deps.shown)
        tool = self.deps.tools.get(call.tool)
        return ToolCallRequest(tool_call=tool_call, tool=tool, state=self._state(), runtime=runtime)

    def _rejected(self, call: Call, reason: str) -> Call | Stop:
        """A human's rejection: the run's end (``tool_rejected``), or, under
        ``on_reject="observe"``, what the model reads in place of a result."""
        name = call.tool
        if self.deps.policy.on_reject == "stop":
            why = reason or "no reason given"
            return Stop(StopReason.TOOL_REJECTED, name, f"a human rejected {name}: {why}")
        if reason:
            text = f"User rejected the tool call for `{name}` with reason: {reason}"
        else:
            text = (
                f"User rejected the tool call for `{name}` with id {call.id}. The tool was not "
                "executed. Do not retry this tool call unless the user explicitly requests it."
            )
        return self._shown(call, Shown(text=text, error=f"{StopReason.TOOL_REJECTED}:{name}"))

    @staticmethod
    def _what(call: Call, text: str | None = None) -> str:
        hashed = args_hash(call.args) if text is None else short_hash(text)
        return identity(call.id, call.tool, hashed)

    def _permit(self, call: Call, rule: str, answer: dict[str, Any] | None, text: str) -> Call:
        keyed = self._keyed(call, text)
        body = {
            "call": call.id, "tool": call.tool, "args": text,
            "args_hash": short_hash(text), "policy": self.deps.context.policy_hash,
            "rule": rule, "step": self.step,
        }  # fmt: skip
        if answer is not None:
            body["answer"] = answer
        self.records.append(Record(self.thread, self.run, Kind.PERMIT, keyed.key, body))
        return keyed

    def _shown(self, call: Call, shown: Shown) -> Call:
        keyed = self._keyed(call).model_copy(update={"shown": shown})
        body = {
            "call": call.id, "tool": call.tool, "args_hash": args_hash(call.args),
            "error": shown.error, "by_human": shown.by_human, "step": self.step,
        }  # fmt: skip
        self.records.append(Record(self.thread, self.run, Kind.REFUSED, keyed.key, body))
        return keyed

    def _refused(self, call: Call, why: Stop) -> Call | Stop:
        """Stop; or, with ``on_tool_error="observe"``, show the model the refusal and its tools.
        A refusal shown to the model still counts as a call, and repeating it is a loop."""
        deps = self.deps
        if deps.policy.on_tool_error == "stop":
            return why
        if self.seen.repeats(call.tool, call.args, deps.policy.loop_detection):
            return loop(call.tool)
        shown = f"{why.message}. Tools you may call: {sorted(deps.allowed)}"
        return self._shown(call, Shown(text=shown, error=str(why)))

    def _counts(self, what: str) -> bool:
        return what in self.admitted or what in self.counted

    def key_for(self, call: Call, text: str | None = None) -> str:
        return key_for(self.deps, self.thread, self.run, call, self.seen, text=text)

    def _keyed(self, call: Call, text: str | None = None) -> Call:
        """The call with its key, counted (``text``: its arguments' canonical JSON, if made)."""
        text = canonical_json(call.args) if text is None else text
        key = self.key_for(call, text)
        what = self._what(call, text)
        if not self._counts(what):
            self.usage = counted(self.usage, call.tool)
            if self.whole is not None:
                self.whole = counted(self.whole, call.tool)
            self.admitted.add(what)
        self.seen.add(loop_key(call.tool, call.args, text))
        return call.model_copy(update={"key": key})


def counted(usage: Usage, tool: str) -> Usage:
    """``usage`` with one more call of ``tool``."""
    per_tool = {**usage.per_tool, tool: usage.per_tool.get(tool, 0) + 1}
    return usage.model_copy(update={"tool_calls": usage.tool_calls + 1, "per_tool": per_tool})


_LOOP = str(StopReason.LOOP_DETECTED)
_REMIND = (
    "You already called {} with these arguments, and its result is above in this "
    "conversation: use it, call something else, or give your final answer. Calling it again "
    "ends the run."
)


def refuse(deps: NodeDeps, name: str) -> Stop | None:
    """Deny by default: unknown names and names outside the allowlist."""
    if name not in deps.tools:
        return Stop(StopReason.TOOL_MISSING, name, f"there is no tool named {name!r}")
    if name not in deps.allowed:
        return Stop(StopReason.TOOL_DENIED, name, f"the policy does not allow {name!r}")
    return None


def loop(name: str) -> Stop:
    return Stop(
        StopReason.LOOP_DETECTED,
        message=f"{name} was already called with the same arguments in this run",
    )


def unavailable(name: str) -> Stop:
    """A call that needs approval in a graph with no checkpointer: nothing could ever answer."""
    return Stop(
        StopReason.APPROVAL_UNAVAILABLE,
        name,
        f"{name} needs a human's approval, but the graph has no checkpointer to pause on; "
        "build it with one (build_graph(..., checkpointer=...)) or serve it with langgraph.json",
    )


def gatekeeper(
    step: Step,
    messages: Sequence[BaseMessage],
    *,
    book: Book,
    place: Place,
    deps: NodeDeps,
    config: RunnableConfig,
    whole: Book | None = None,
) -> Gatekeeper:
    """The gate's checks for ``step``'s run: counts from its record (``whole``: the thread's,
    when a limit holds across its runs), loops from this branch."""
    tally = book.tally
    return Gatekeeper(
        deps=deps,
        config=config,
        thread=place.thread,
        run=step.run,
        usage=tally.usage(),
        whole=None if whole is None else whole.tally.usage(),
        held=Limits(deps.policy, tally.extensions),
        seen=branch_calls(messages, step.run),
        counted=tally.counted,
        asked=frozenset(tally.asked),
        messages=messages,
        step=branch_step(messages, step.run),
    )
