"""What the model said and asked for: its reply, the action the contract made of it, and the
retry a malformed reply earned."""

from typing import Annotated, Any, Literal

from pydantic import Field

from gated_react.state.base import StrictModel


def _unset(value: Any) -> bool:
    return value is None


class Reply(StrictModel):
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
    usage_metadata: dict[str, Any] | None = Field(default=None, exclude_if=_unset)
    """The reply's token counts as LangChain reports them (``AIMessage.usage_metadata``), kept
    on the AI messages stored of it, as ``create_agent`` keeps them."""
    response_metadata: dict[str, Any] | None = Field(default=None, exclude_if=_unset)
    """What the provider said of the reply (finish reason, model name, id), as plain JSON:
    kept on the AI messages stored of it."""
    additional_kwargs: dict[str, Any] | None = Field(default=None, exclude_if=_unset)
    """The provider's extra fields on the reply (e.g. OpenAI's ``refusal``), as plain JSON: kept
    on the AI messages stored of it, as ``create_agent`` keeps them (tool calls excepted: the
    message holds them as its own)."""


class ToolAction(StrictModel):
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


class ToolCalls(StrictModel):
    """The model asks for several tool calls in one reply (``Policy.max_parallel_calls``)."""

    kind: Literal["tools"] = "tools"
    """Always ``"tools"``."""
    calls: list[ToolAction] = Field(min_length=2)
    """The calls, in the reply's order."""


class FinalAction(StrictModel):
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


class Retry(StrictModel):
    """A malformed reply that earned a format reminder."""

    why: str
    """The contract violation, e.g. ``no_action``."""
    message: str
    """What was wrong, shown to the model in the reminder."""
    count: int
    """Reminders given in a row."""
