"""The run's state as the checkpointer stores it.

Channels hold plain JSON values (nodes write ``model_dump()`` output), so any checkpointer, the
LangGraph server and Studio can store and show them without importing this package; ``messages``
holds LangChain messages, the convention chat clients read.
``history``, ``trace`` and ``messages`` are ``DeltaChannel``s: a checkpoint stores the new entries,
not the whole list again, so storage grows linearly with the run instead of quadratically.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Required, TypedDict

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    HumanMessage,
    RemoveMessage,
)
from langgraph.channels import DeltaChannel
from langgraph.graph.message import add_messages
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Status = Literal["ok", "stopped"]


def _append(current: list[Any] | None, writes: Sequence[list[Any]]) -> list[Any]:
    """Reducer for append-only logs; batching-invariant as DeltaChannel requires."""
    out = list(current or ())
    for batch in writes:
        out.extend(batch)
    return out


def _add_messages(current: list[Any] | None, writes: Sequence[Any]) -> list[Any]:
    """``add_messages`` folded over a batch: a DeltaChannel's reducer, so a checkpoint stores
    the step's new messages, not the whole conversation again. New messages with ids of their
    own (what the nodes write) are appended as ``add_messages`` would append them, the ids
    compared in C: its Python loops over the whole conversation cost 0.1 ms a write at 300
    steps; anything else (a removal, a replacement, a message without an id) is its own."""
    out: list[Any] = list(current or ())
    for batch in writes:
        out = _appended(out, batch) or list(add_messages(out, batch))
    return out


def _appended(messages: list[Any], batch: Any) -> list[Any] | None:
    """``messages`` then ``batch`` when ``add_messages`` would give exactly that (plain messages
    on both sides, every id set, the new ones new and distinct), else None."""
    if not isinstance(batch, list) or not all(
        map(_plain, {*map(type, messages), *map(type, batch)})
    ):
        return None
    known, new = set(map(_ID, messages)), list(map(_ID, batch))
    if None in known or None in new or len(set(new)) != len(new) or not known.isdisjoint(new):
        return None
    return [*messages, *batch]


_ID = operator.attrgetter("id")


def _plain(kind: type) -> bool:
    return issubclass(kind, BaseMessage) and not issubclass(kind, BaseMessageChunk | RemoveMessage)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ToolAction(_Strict):
    """The model asks to call one tool."""

    kind: Literal["tool"] = "tool"
    """Always ``"tool"``."""
    name: str
    """The tool's registered name."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the tool."""
    id: str | None = None
    """The call's id in ``messages`` (the model's own, else one made from its reply's id);
    the ``ToolMessage`` with its result answers it. Set by ``validate``."""


class ToolCalls(_Strict):
    """The model asks for several tool calls in one reply (``Policy.max_parallel_calls``)."""

    kind: Literal["tools"] = "tools"
    """Always ``"tools"``."""
    calls: list[ToolAction] = Field(min_length=2)
    """The calls, in the reply's order."""


class FinalAction(_Strict):
    """The model gives its final answer."""

    kind: Literal["final"] = "final"
    """Always ``"final"``."""
    answer: str
    """The answer, non-blank."""


Action = Annotated[ToolAction | ToolCalls | FinalAction, Field(discriminator="kind")]


def tool_actions(action: ToolAction | ToolCalls | FinalAction | None) -> list[ToolAction]:
    """The tool calls an action asks for, in order (none for a final answer)."""
    if isinstance(action, ToolAction):
        return [action]
    return list(action.calls) if isinstance(action, ToolCalls) else []


class Reply(_Strict):
    """What the model said, before the action contract is applied."""

    id: str | None = None
    """The model message's id: a final answer is stored in ``messages`` under it, so the
    answer a chat client saw stream and the one the thread keeps are one message."""
    text: str = ""
    """The reply's text content."""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    """Native tool calls as ``{"name", "args", "id"}`` (``id`` as the model gave it, or None)."""
    invalid_tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    """Native tool calls whose arguments were not valid JSON or could not be stored."""


class Outcome(_Strict):
    """What came of an approved call."""

    ok: bool
    """True when the tool ran and returned."""
    observation: Any = None
    """The tool's result (JSON), or the error text the model is shown."""
    error: str | None = None
    """A stop-reason string when the call failed or was refused, e.g. ``tool_timeout:search``."""
    by_human: bool = False
    """True when a human answered in place of the tool (a ``respond`` decision): it did not run."""


class Call(_Strict):
    """A call the gate let through, recorded before it runs so a crash cannot repeat it blindly."""

    step: int
    """The step that proposed it."""
    tool: str
    """The tool's name."""
    args: dict[str, Any]
    """The arguments it runs with (a human may have edited them)."""
    key: str
    """Idempotency key: stable for this thread, step, tool and arguments."""
    id: str | None = None
    """The tool call id in ``messages``: its ``ToolMessage`` answers it."""
    outcome: Outcome | None = None
    """Filled in by ``execute`` (or by the gate for a refusal the model is shown)."""


class HistoryEntry(_Strict):
    """One completed tool step, as the model will see it again."""

    step: int
    """The step number (1-based)."""
    action: ToolAction
    """The call that ran."""
    observation: Any
    """What it returned, cut to ``Policy.max_observation_chars``."""


class TraceEntry(_Strict):
    """One tool call that reached the gate: the audit log."""

    step: int
    """The step number (1-based)."""
    tool: str
    """The tool's name."""
    args_hash: str
    """Short stable hash of the arguments' canonical JSON."""
    ok: bool
    """True when the call ran and returned."""
    error: str | None = None
    """Why a call that did not stop the run failed (``Policy.on_tool_error="observe"``)."""
    stop_reason: str | None = None
    """Set on the entry of the call that ended the run."""
    by_human: bool | None = None
    """True when a human answered in place of the tool (``respond``): the tool did not run."""
    extended: str | None = None
    """Set on the entry of a budget a human extended (``tool`` names the budget then), e.g.
    ``max_steps 8 -> 12 (approve)``."""


class Extension(_Strict):
    """A spent budget a human extended (``Policy.on_budget="ask"``); it counts from then on."""

    budget: str
    """The budget: ``max_steps``, ``max_tool_calls``, ``tool_limit:<tool>``, ``max_seconds``,
    ``max_tokens`` or ``max_cost``."""
    limit: float
    """The new limit."""
    was: float
    """The limit before."""
    spent: float
    """What the run had spent of it when the human was asked."""
    decision: Literal["approve", "edit"]
    """``approve`` took the proposed extension, ``edit`` set this limit."""
    step: int
    """The step at which it was granted."""


def _amount(value: float) -> bool:
    return math.isfinite(value) and value >= 0


SECONDS_CAP = 1e15
"""The most active seconds ``Usage.seconds`` holds: what a non-finite figure reads as, past any
``max_seconds``."""


class Usage(_Strict):
    """Budget consumption. The call counts could be recounted from the history, but the gate
    checks them before every call: kept here they cost the same at step 1 and at step 1,000."""

    steps: int = 0
    """Model decisions requested so far."""
    tool_calls: int = 0
    """Tool calls let through or shown to the model as refused (both count)."""
    per_tool: dict[str, int] = Field(default_factory=dict)
    """The same, per tool name."""
    tokens: int = 0
    """Model tokens spent (reported by the model, else estimated); ``max_tokens`` counts these.
    A reported count is used only if it is a non-negative integer (capped at 10**15)."""
    estimated_tokens: int = 0
    """Of ``tokens``, those estimated because a reply reported no usable total (none, zero,
    negative or not an integer): how much of ``tokens`` is a guess."""
    cached_tokens: int = 0
    """Of the input tokens, those the provider reported as read from its prompt cache
    (``input_token_details.cache_read``): billed at a fraction of the price; counted in
    ``tokens`` too."""
    input_tokens: int = 0
    """Input (prompt) tokens the provider reported, the cached ones included."""
    output_tokens: int = 0
    """Output (completion) tokens the provider reported, reasoning tokens included."""
    cost: float | None = 0.0
    """US dollars the model calls cost (input, cached input and output tokens at the model's
    prices); None when any call could not be priced (``unpriced`` says why): never a guess."""
    unpriced: str | None = None
    """Why ``cost`` is None: the model is in no price table, or a reply reported no tokens."""
    seconds: float = 0.0
    """Active seconds spent in model and tool calls; paused or crashed time is not counted.
    Finite: a stored NaN or infinity reads as ``SECONDS_CAP`` (spent past every limit), a
    negative figure as 0."""

    @model_validator(mode="before")
    @classmethod
    def _finite_cost(cls, data: Any) -> Any:
        """A cost that is no amount of dollars (NaN, infinite, negative: an edit, never a
        price) reads as unknown, which no ``max_cost`` lets pass: NaN compares false, and a
        budget compared against it would never bind."""
        cost = data.get("cost") if isinstance(data, dict) else None
        if isinstance(cost, int | float) and not isinstance(cost, bool) and not _amount(cost):
            why = f"usage.cost was {cost}, not an amount of US dollars: what was spent is unknown"
            return {**data, "cost": None, "unpriced": why}
        return data

    @field_validator("seconds")
    @classmethod
    def _finite_seconds(cls, seconds: float) -> float:
        if not math.isfinite(seconds):
            return SECONDS_CAP
        return max(seconds, 0.0)


class RunContext(_Strict):
    """What a run ran under, written once by its first decision: compare two runs by it."""

    model_class: str
    """The chat model's class, e.g. ``langchain_openai.chat_models.base.ChatOpenAI``."""
    model: str
    """The model's name (what prices it)."""
    base_url: str | None = None
    """Where the model was served from, with any password or key masked; None for the default."""
    protocol: str
    """How the model stated its actions: ``tools``, ``json`` or ``text``."""
    policy: dict[str, Any]
    """The policy in force, every field as plain JSON (its budget among them)."""
    policy_hash: str
    """A short hash of ``policy``: equal for runs under the same policy."""
    priced_by: str | None = None
    """Where the cost came from: ``policy``, ``genai-prices <version>``, or None (unpriced)."""
    version: str
    """The gated-react version that ran it."""


class Retry(_Strict):
    """A malformed reply that earned a format reminder."""

    why: str
    """The contract violation, e.g. ``no_action``."""
    message: str
    """What was wrong, shown to the model in the reminder."""
    count: int
    """Reminders given in a row."""


class RunInput(_Strict):
    """What starts a run: a goal, or chat messages whose last human message is the goal."""

    goal: str | None = Field(default=None, min_length=1)
    """The task, in the user's words."""
    messages: list[AnyMessage] | None = None
    """Chat messages (Studio's chat, Agent Chat UI, apps built for ``create_agent``): the last
    human message is the goal; earlier ones are the conversation the model is shown once."""

    @model_validator(mode="after")
    def _has_a_goal(self) -> RunInput:
        if self.goal is None and last_human_text(self.messages or []) is None:
            raise ValueError(
                "a run needs a goal: {'goal': '...'} or {'messages': [...]} with a human message"
            )
        return self


def last_human_text(messages: Sequence[Any]) -> str | None:
    """The text of the last message when it is a human message with text, else None."""
    last = messages[-1] if messages else None
    if isinstance(last, HumanMessage) and last.text.strip():
        return last.text.strip()
    return None


class RunInputDict(TypedDict, total=False):
    """``RunInput`` as a plain dict, the way apps pass it: ``graph.invoke({"goal": ...})`` or
    ``graph.invoke({"messages": [...]})``."""

    goal: str
    messages: list[Any]


class RunResult(BaseModel):
    """The shape ``invoke`` returns."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    status: Status | None = None
    """``ok`` after a final answer, ``stopped`` after any other end, None while unfinished."""
    stop_reason: str | None = None
    """Why the run ended, e.g. ``success`` or ``tool_denied:refund``."""
    message: str | None = None
    """A human sentence about the end, with numbers."""
    answer: str | None = None
    """The final answer; None unless status is ``ok``."""
    messages: list[AnyMessage] = Field(default_factory=list)
    """The conversation as a chat client shows it, as ``create_agent`` stores it: each run's
    goal (human), an AI message with the tool calls of each step, one ``ToolMessage`` per call
    (``status="error"`` with the reason for a call that did not run), then the answer (or why
    the run stopped) as an AI message. Every tool call id is answered."""
    history: list[HistoryEntry] = Field(default_factory=list)
    """Completed tool steps."""
    trace: list[TraceEntry] = Field(default_factory=list)
    """Every call that reached the gate."""
    usage: Usage = Field(default_factory=Usage)
    """Budget consumption."""
    structured_response: dict[str, Any] | None = None
    """The final answer as the data ``response_format`` (``Policy.answer_schema``) describes,
    as plain JSON: ``Schema.model_validate(result["structured_response"])`` is the object
    ``create_agent`` returns; None without a schema or before a final answer."""


class CoreState(_Strict):
    """The state without its logs: what most nodes read. Validating it costs the same at step 1
    and at step 1,000, so only the nodes that need the logs pay for them (decide, gate)."""

    goal: str = ""
    """The task, in the user's words (from the last human message when a run starts from
    ``messages``)."""
    reply: Reply | None = None
    """The model's latest raw reply."""
    action: Action | None = None
    """The latest reply after the action contract: tool calls or a final answer."""
    calls: list[Call] = Field(default_factory=list)
    """The calls of this step between gate and observe, in the reply's order; an outcome is
    None while its call has not finished."""
    retry: Retry | None = None
    """Set while a malformed reply is being retried with a reminder."""
    usage: Usage = Field(default_factory=Usage)
    """Budget consumption."""
    run_context: RunContext | None = None
    """What this run ran under: model, base URL, protocol, policy and its hash, version."""
    extensions: list[Extension] = Field(default_factory=list)
    """Budget extensions humans granted this run, oldest first; the policy's ``Budget`` stays
    as it was (``budget_checks.limits`` combines them)."""
    seen: Annotated[list[str], DeltaChannel(_append)] = Field(default_factory=list)
    """Loop keys of the calls made so far: tool, exact and normalized argument hashes."""
    seen_from: int = 0
    """Loop keys before this index belong to earlier runs on the thread (not compared)."""
    spend: Annotated[list[float | None], DeltaChannel(_append)] = Field(default_factory=list)
    """What each model reply cost in USD (None: unpriced), append-only: ``max_cost`` counts
    the run's record, never less, so an edit of ``usage.cost`` alone cannot buy more spend."""
    spend_from: int = 0
    """Entries of ``spend`` before this index belong to earlier runs on the thread."""
    history_from: int = 0
    """History entries before this index belong to earlier runs on the thread."""
    turn: str | None = None
    """The id of the human message in ``messages`` this run answers: a message after it, or a
    goal that differs from it, is a new turn that ends this run if it is unfinished."""
    status: Status | None = None
    """``ok`` or ``stopped`` once the run has ended."""
    stop_reason: str | None = None
    """Why the run ended (or is ending)."""
    message: str | None = None
    """A human sentence about the end."""
    answer: str | None = None
    """The final answer after success."""
    traceparent: str | None = None
    """The W3C trace context of the last traced invocation on this thread, so the next one
    (a resume) links its span to it; None while no OpenTelemetry SDK records."""


class State(CoreState):
    """Everything a run knows; the checkpointer saves it after every node."""

    history: Annotated[list[HistoryEntry], DeltaChannel(_append)] = Field(default_factory=list)
    """Completed tool steps (append-only)."""
    trace: Annotated[list[TraceEntry], DeltaChannel(_append)] = Field(default_factory=list)
    """Every call that reached the gate (append-only)."""
    messages: Annotated[list[AnyMessage], DeltaChannel(_add_messages)] = Field(default_factory=list)
    """The conversation, across runs: goals, the tool calls and their results, answers
    (append-only but for a message replaced under its own id)."""
    structured_response: dict[str, Any] | None = None
    """The answer as ``response_format``'s data (plain JSON), after success with a schema;
    written by finish and stop, read by no node (so no step pays for reading it)."""


class UsageDict(TypedDict):
    """``Usage`` as a result holds it (plain JSON)."""

    steps: int
    tool_calls: int
    per_tool: dict[str, int]
    tokens: int
    estimated_tokens: int
    cached_tokens: int
    input_tokens: int
    output_tokens: int
    cost: float | None
    unpriced: str | None
    seconds: float


class ActionRequest(TypedDict):
    """One call a question asks about, in LangChain's ``HITLRequest`` shape."""

    name: str
    args: dict[str, Any]
    description: str


class ReviewConfig(TypedDict):
    """The decisions a question allows for one call (LangChain's ``HITLRequest``)."""

    action_name: str
    allowed_decisions: list[str]


class Question(TypedDict, total=False):
    """A question a paused run waits on, as ``pending`` holds it: our keys beside LangChain's
    ``HITLRequest`` (``action_requests``, ``review_configs``), and the ``id`` an answer may
    name (``resume(question=)``)."""

    id: Required[str]
    kind: Required[str]
    """``approval``, ``outcome_unknown`` (after a crash), or a budget question."""
    tool: str
    args: dict[str, Any]
    step: int
    why: str
    action_requests: list[ActionRequest]
    review_configs: list[ReviewConfig]
    answers: dict[str, Any]
    """Example answers, by name."""
    error: str | None
    """Why the last answer was not taken (the question is asked again), else None."""
    asked_as: list[str]
    """The ids this question was asked under before (an answer not understood asks again, under
    a new id): an answer naming one of them answers it too."""


class ThreadResult(TypedDict):
    """What ``run``, ``resume`` and ``read`` return: the graph's result keys plus the thread
    and its open questions. Typed, so ``result["statsu"]`` fails a type check."""

    status: Literal["ok", "stopped", "paused"] | None
    """``ok``, ``stopped``, ``paused`` while ``pending`` holds questions; None for a run that
    is unfinished (a crash or kill): resume it."""
    stop_reason: str | None
    message: str | None
    answer: str | None
    history: list[dict[str, Any]]
    trace: list[dict[str, Any]]
    usage: UsageDict
    messages: list[Any]
    structured_response: dict[str, Any] | None
    thread_id: str
    pending: list[Question]
    """The questions a paused run waits on, each with its ``id``."""


RESULT_KEYS = tuple(RunResult.model_fields)
"""The keys of every run's result, in order."""
SUMMARY_KEYS = ("status", "stop_reason", "message", "answer")
"""The keys that say how a run ended (status, stop_reason, message, answer), without its logs."""


def dump(model: BaseModel | None) -> dict[str, Any] | None:
    """Plain JSON for a channel write; log entries leave out their unset optional fields."""
    if model is None:
        return None
    return model.model_dump(mode="json", exclude_none=isinstance(model, TraceEntry))
