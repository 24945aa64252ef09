"""The state's shapes as plain dicts, the way apps pass and read them: a run's input, a
thread's result, the questions a paused run waits on. TypedDicts, so a misspelt key fails a
type check; none is stored as a type (a result is plain JSON)."""

from __future__ import annotations

from typing import Any, Literal, Required, TypedDict


class RunInputDict(TypedDict, total=False):
    """``RunInput`` as a plain dict, the way apps pass it: ``graph.invoke({"goal": ...})`` or
    ``graph.invoke({"messages": [...]})``."""

    goal: str
    messages: list[Any]


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
