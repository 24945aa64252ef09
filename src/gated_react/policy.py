"""What a run may do: budgets and the rules the gate enforces. Frozen: a run cannot change them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import Annotated, Any, Literal
from typing import Protocol as TypingProtocol

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from gated_react.errors import GatedReactError

Protocol = Literal["tools", "json", "text"]
LoopMode = Literal["exact", "normalized", "off"]
OnError = Literal["stop", "observe"]
OnInvalid = Literal["stop", "retry"]
OnBudget = Literal["stop", "ask"]
OnReject = Literal["stop", "observe"]
OnToolLimit = Literal["stop", "observe"]
ApprovalDecision = Literal["approve", "edit", "reject", "respond"]
APPROVAL_DECISIONS: tuple[ApprovalDecision, ...] = ("approve", "edit", "reject", "respond")
"""What a human may answer an approval question with, in the order a reviewer is shown them."""
TOOL_NAME_FIELDS = (
    "allow",
    "require_approval",
    "approval_decisions",
    "budget.tool_limits",
    "budget.thread_tool_limits",
    "on_tool_limit",
    "tool_timeouts",
)
"""The policy fields that name tools; ``build_graph`` refuses a name that is not a tool."""


def _names(value: Any) -> Any:
    if isinstance(value, str):
        raise ValueError(f"expected a list or set of tool names, got one string {value[:60]!r}")
    return value


ToolNames = Annotated[AbstractSet[str], BeforeValidator(_names), AfterValidator(frozenset)]
"""Tool names as users write them (a set, frozenset, list or tuple; typed as a set, so a plain
``{"x"}`` passes ``mypy --strict``), stored as a frozenset."""


class UnknownToolName(GatedReactError, ValueError):
    """A policy names a tool the graph was not given."""

    def __init__(self, unknown: dict[str, list[str]], known: Iterable[str]) -> None:
        where = "; ".join(f"{field}: {', '.join(names)}" for field, names in unknown.items())
        tools = ", ".join(sorted(known)) or "none"
        super().__init__(f"the policy names tools that do not exist ({where}); tools: {tools}")
        self.unknown = unknown


class UnsupportedResponseFormat(GatedReactError, TypeError):
    """A ``response_format`` that is not a pydantic model (nor a LangChain strategy holding one)."""


class TwoAnswerSchemas(GatedReactError, ValueError):
    """``response_format`` and ``Policy.answer_schema`` name different schemas."""


class UnpricedModel(GatedReactError, ValueError):
    """A cost budget for a model no price is known for: it could never be enforced."""


WHOLE_BUDGETS = ("max_steps", "max_tool_calls", "max_tokens", "tool_limit")
"""The budgets that count whole things (their limits are integers); seconds and cost do not."""


class Extended(TypingProtocol):
    """An extension of one budget, as ``State.extensions`` records it."""

    @property
    def budget(self) -> str: ...
    @property
    def limit(self) -> float: ...


class Budget(BaseModel):
    """Hard limits for one run. They are checked by the graph, never left to the model."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    max_steps: int = Field(default=8, ge=1)
    """How many times the model may be asked for an action (the last ask may still answer)."""
    max_tool_calls: int = Field(default=6, ge=0)
    """How many tool calls the run may make in total."""
    max_seconds: float = Field(default=20.0, gt=0)
    """Active seconds (model and tool time) the run may spend; paused or crashed time is free
    (a call cut off by a crash keeps the seconds it had run, to within a second)."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Total model tokens (as reported by the model) the run may spend; None means unlimited."""
    max_cost: float | None = Field(default=None, gt=0)
    """US dollars the run's model calls may cost (priced by ``genai-prices`` or
    ``Policy.prices``); None means unlimited. An unpriced model with a cost budget is refused
    when the graph is built."""
    tool_limits: dict[str, int] = Field(default_factory=dict)
    """Per-tool caps on calls, e.g. ``{"search_policy": 2}``."""
    thread_max_steps: int | None = Field(default=None, ge=1)
    """Model decisions the thread's runs may make together, this run's included (the
    call-limit middlewares' ``thread_limit``); None means no limit. Never extended by a human."""
    thread_max_tool_calls: int | None = Field(default=None, ge=0)
    """Tool calls the thread's runs may make together; None means no limit."""
    thread_tool_limits: dict[str, int] = Field(default_factory=dict)
    """Per-tool caps on the calls the thread's runs make together."""

    @field_validator("tool_limits", "thread_tool_limits")
    @classmethod
    def _non_negative(cls, value: dict[str, int]) -> dict[str, int]:
        bad = {name: cap for name, cap in value.items() if cap < 0}
        if bad:
            raise ValueError(f"tool limits must be >= 0, got {bad}")
        return value

    def per_thread(self, *, tools: bool) -> bool:
        """Whether a limit holds across the thread's runs on its tool calls (``tools``) or on
        its model decisions: the thread's record is read whole, where that limit is checked."""
        if not tools:
            return self.thread_max_steps is not None
        return self.thread_max_tool_calls is not None or bool(self.thread_tool_limits)

    def extended(self, extensions: Sequence[Extended]) -> Budget:
        """The limits in force: this budget with each extension a human granted applied,
        oldest first (``Policy.on_budget="ask"``; the budget itself stays frozen)."""
        if not extensions:
            return self
        changes: dict[str, Any] = {}
        caps = dict(self.tool_limits)
        for extension in extensions:
            kind, _, tool = extension.budget.partition(":")
            limit = int(extension.limit) if kind in WHOLE_BUDGETS else extension.limit
            if kind == "tool_limit":
                caps[tool] = int(limit)
            else:
                changes[kind] = limit
        return self.model_copy(update={**changes, "tool_limits": caps})


class Price(BaseModel):
    """What one model costs, in US dollars per million tokens: for self-hosted or private
    models no price table knows, or to override the table's figure."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    input: float = Field(ge=0, allow_inf_nan=False)
    """Input (prompt) tokens not read from the provider's prompt cache (cache writes and audio
    input included). Finite, as every price: 0 tokens at an infinite price is NaN dollars."""
    cached_input: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Input tokens read from the prompt cache; None charges them at the ``input`` price."""
    output: float = Field(ge=0, allow_inf_nan=False)
    """Output (completion) tokens, reasoning and audio tokens included."""


class Policy(BaseModel):
    """The rules the gate applies to every proposed action. Defaults are the safe choice."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    budget: Budget = Field(default_factory=Budget)
    """The run's hard limits."""
    allow: ToolNames | None = None
    """Tools the model may call; None allows exactly the tools given to ``build_graph`` (that
    list is the allowlist: any other name is refused, ``tool_missing``)."""
    require_approval: ToolNames = frozenset()
    """Tools whose calls pause for a human decision before they run."""
    on_reject: OnReject = "stop"
    """What a human's rejection of a call does: end the run (``tool_rejected:<tool>``), or
    show the model the rejection and its reason as the call's result, so it can answer the
    user (``HumanInTheLoopMiddleware``'s way; a graph built with one takes it)."""
    approval_decisions: dict[str, tuple[ApprovalDecision, ...]] = Field(default_factory=dict)
    """Per tool under approval, the decisions its question takes (``HumanInTheLoopMiddleware``'s
    ``allowed_decisions``), e.g. ``{"issue_refund": ("approve", "reject")}``: a human may not
    edit the call or answer in place of the tool. Approve and reject are always among them;
    a tool not named takes all four."""
    protocol: Protocol = "tools"
    """How the model states its action: native tool calls, one JSON object, or ReAct text."""
    json_schema: bool = True
    """JSON protocol: request a schema built from the allowed tools (else plain json_object)."""
    schema_max_string: int | None = Field(default=None, ge=1)
    """Caps string lengths in that schema so small models cannot run out of tokens mid-object."""
    schema_max_integer: int | None = Field(default=None, ge=1)
    """Caps integer magnitudes in that schema, for the same reason."""
    loop_detection: LoopMode = "exact"
    """Stop on a repeated call: same tool and arguments, compared exactly or normalized."""
    repeat_reminders: int = Field(default=0, ge=0, le=5)
    """How many times a repeated call is answered with a reminder instead of running (an
    observation saying it was already made and that its result is above) before the next repeat
    stops the run as ``loop_detected``. Each reminder counts as a tool call."""
    context_steps: int | None = Field(default=12, ge=1)
    """The most past steps the model sees in full. Past it, the oldest are folded into a short
    summary at the end of the goal's turn, leaving ``context_keep``, and the transcript grows
    again: the prompt stays bounded, and a fold only appends to the summary, so a server's
    prefix cache keeps the system prompt, the goal and the earlier summary. None never folds."""
    context_keep: int = Field(default=1, ge=0)
    """Steps still shown in full right after a fold (at most ``context_steps - 1``)."""
    context_messages: int | None = Field(default=20, ge=1)
    """The most questions and answers of earlier runs on the thread (the chat so far) the model
    is shown, the newest kept; None shows them all."""
    context_message_chars: int | None = Field(default=2000, ge=100)
    """Each of those questions and answers is cut to this many characters (ending ``...``);
    None never cuts them."""
    max_observation_chars: int = Field(default=4000, ge=100)
    """Longer tool results are cut to this many characters with a visible marker."""
    tool_timeout_seconds: float = Field(default=30.0, gt=0)
    """Default time a tool call may take."""
    tool_timeouts: dict[str, float] = Field(default_factory=dict)
    """Per-tool timeouts that override the default."""
    tool_retries: int = Field(default=0, ge=0, le=10)
    """Extra attempts for a failing idempotent tool (exponential backoff with jitter)."""
    model_retries: int = Field(default=2, ge=0, le=10)
    """Extra attempts for a model call that failed in a way that passes (429, 500, 502, 503,
    504, a refused or dropped connection, a read timeout), after exponential waits with jitter
    (longer if the server's ``Retry-After`` asks), within the seconds left in the budget; never
    for 400, 401, 403 or a context too long. A chat client's own retries come on top of these:
    ``chat_model(settings, policy=...)`` turns ``ChatOpenAI``'s off while these are on."""
    max_parallel_calls: int = Field(default=1, ge=1, le=16)
    """How many tool calls one reply may hold (``tools`` protocol). The gate checks them all
    before any runs; the allowed ones run at once. With 1, providers are asked for one call."""
    on_tool_error: OnError = "stop"
    """What a refused, failed or timed-out call does: end the run, or become an observation."""
    on_invalid_action: OnInvalid = "stop"
    """What a malformed model reply does: end the run, or get a format reminder and another try."""
    max_invalid_retries: int = Field(default=2, ge=0, le=10)
    """How many reminders in a row a malformed reply may get before the run stops."""
    on_budget: OnBudget = "stop"
    """What a spent budget does (steps, tool calls, a tool's cap, seconds, tokens, cost): end
    the run, or pause it on a question to a human who may extend the limit (needs a
    checkpointer; without one the budget stops the run). ``loop_detected`` never asks."""
    on_tool_limit: OnToolLimit | dict[str, OnToolLimit] = "stop"
    """What a call over a tool budget (``max_tool_calls``, a tool's cap in ``tool_limits``,
    their ``thread_`` twins) does: what ``on_budget`` says, or, with ``"observe"``, it does not
    run and the model is told "Tool call limit exceeded" as its result and goes on
    (``ToolCallLimitMiddleware``'s ``exit_behavior="continue"``; a graph given that middleware
    takes it). Per budget: ``{"search": "stop", "*": "observe"}`` (a tool's cap by its name;
    ``"*"`` for ``max_tool_calls`` and the caps of tools not named; ``"stop"`` when neither
    is). Such a call counts as a call; the other budgets (steps, seconds, tokens, cost) still
    stop the run."""
    answer_schema: type[BaseModel] | None = None
    """A pydantic model the final answer must fit: its text is one JSON object of that shape."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """Prices by model name (as the chat model names itself: ``model_name``, ``model``, else its
    type), used before ``genai-prices``' table, e.g. ``{"my-llama": Price(input=0.1,
    output=0.2)}``."""

    @field_validator("approval_decisions")
    @classmethod
    def _decisions(
        cls, value: dict[str, tuple[ApprovalDecision, ...]]
    ) -> dict[str, tuple[ApprovalDecision, ...]]:
        for tool, decisions in value.items():
            if not {"approve", "reject"} <= set(decisions):
                raise ValueError(f"{tool}: a human can always approve and reject, got {decisions}")
        # in the order a reviewer is shown them, each once
        return {tool: tuple(d for d in APPROVAL_DECISIONS if d in ds) for tool, ds in value.items()}

    @model_validator(mode="after")
    def _decided_tools_need_approval(self) -> Policy:
        unasked = ", ".join(sorted(set(self.approval_decisions) - self.require_approval))
        if unasked:
            raise ValueError(f"approval_decisions names tools not in require_approval: {unasked}")
        return self

    def on_limit(self, tool: str | None) -> OnToolLimit:
        """What a spent tool budget does: ``tool``'s cap, or (None) ``max_tool_calls``."""
        rule = self.on_tool_limit
        if isinstance(rule, str):
            return rule
        return rule.get(tool, rule.get("*", "stop")) if tool is not None else rule.get("*", "stop")

    def decisions_for(self, tool: str) -> tuple[ApprovalDecision, ...]:
        """The decisions an approval question about ``tool`` takes."""
        return self.approval_decisions.get(tool, APPROVAL_DECISIONS)

    def replace(self, **changes: Any) -> Policy:
        """A copy with ``changes`` applied and validated like the constructor (an unknown name
        is an error); ``Budget`` fields (``max_steps``, ...) may be given at top level, so
        ``Policy().replace(max_steps=3, protocol="json")`` is one flat call."""
        flat = {name: changes.pop(name) for name in list(changes) if name in Budget.model_fields}
        budget = changes.pop("budget", self.budget)
        if flat:
            budget = Budget.model_validate({**Budget.model_validate(budget).model_dump(), **flat})
        current = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self).model_validate({**current, **changes, "budget": budget})

    def unknown_tools(self, known: Iterable[str]) -> dict[str, list[str]]:
        """Per-tool names that name no tool in ``known``, by field (``TOOL_NAME_FIELDS``):
        a misspelled name would silently lift an approval, a cap or a timeout."""
        known = frozenset(known)
        named = {
            "allow": self.allow or (),
            "require_approval": self.require_approval,
            "approval_decisions": self.approval_decisions,
            "budget.tool_limits": self.budget.tool_limits,
            "budget.thread_tool_limits": self.budget.thread_tool_limits,
            "on_tool_limit": [t for t in self.on_tool_limit if t != "*"]
            if isinstance(self.on_tool_limit, dict)
            else (),
            "tool_timeouts": self.tool_timeouts,
        }
        unknown = {field: sorted(set(names) - known) for field, names in named.items()}
        return {field: names for field, names in unknown.items() if names}

    def check_tools(self, known: Iterable[str]) -> None:
        """Raise ``UnknownToolName`` if any per-tool field names a tool not in ``known``."""
        known = frozenset(known)
        unknown = self.unknown_tools(known)
        if unknown:
            raise UnknownToolName(unknown, known)

    def allowed(self, registered: frozenset[str]) -> frozenset[str]:
        """The names the gate lets through: the allowlist narrowed to what is registered."""
        return registered if self.allow is None else frozenset(self.allow & registered)

    def timeout_for(self, tool: str) -> float:
        """The timeout for one tool."""
        return self.tool_timeouts.get(tool, self.tool_timeout_seconds)


def with_response_format(policy: Policy, response_format: Any) -> Policy:
    """The policy with ``create_agent``'s ``response_format`` as its ``answer_schema`` (the one
    home of the concept): a pydantic model, or LangChain's ``ToolStrategy`` /
    ``ProviderStrategy`` holding one (either way the answer is checked JSON text here)."""
    if response_format is None:
        return policy
    schema = response_schema(policy, response_format)
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise UnsupportedResponseFormat(
            "response_format must be a pydantic model (or ToolStrategy/ProviderStrategy of one), "
            f"got {type(schema).__name__}: a TypedDict, dataclass or JSON schema cannot be "
            "checked as one; write it as a pydantic model"
        )
    return policy.replace(answer_schema=schema)


def response_schema(policy: Policy, response_format: Any) -> Any:
    """The schema ``response_format`` asks for (LangChain's strategies keep it as ``.schema``);
    ``TwoAnswerSchemas`` when ``Policy.answer_schema`` is another one."""
    schema = response_format
    if not isinstance(schema, type):
        schema = getattr(response_format, "schema", response_format)
    if policy.answer_schema not in (None, schema):
        raise TwoAnswerSchemas(
            f"response_format {schema_name(schema)} and Policy.answer_schema "
            f"{policy.answer_schema.__name__} differ: give one of them"
        )
    return schema


def schema_name(schema: Any) -> str:
    """A schema as a message names it."""
    if isinstance(schema, dict):  # a JSON schema
        return str(schema.get("title") or "(a JSON schema)")
    return str(getattr(schema, "__name__", None) or repr(schema))
