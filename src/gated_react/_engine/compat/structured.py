"""``create_agent``'s ``response_format``, as ``create_agent`` asks for it and returns it.

A ``ToolStrategy`` offers the model one tool per schema and requires a tool call; a call of
one is the final answer: the conversation gets the model's call and a ``ToolMessage``
("Returning structured response: ..."), ``structured_response`` the schema's object. A
``ProviderStrategy`` binds the provider's own structured output; the answer is the model's JSON
text. A schema given alone is the provider's way when the model supports it, else the tool's
(LangChain's ``AutoStrategy`` rule). The JSON and text protocols ask for the JSON in the prompt
(``Policy.answer_schema``). Schemas are pydantic models, dataclasses, TypedDicts or JSON
schemas; the state stores the answer as JSON and reads it back as the schema's object.

The output tools run nowhere: a call of one never reaches the gate (it is the answer, not an
action), and no other tool of that reply runs either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool
from pydantic import PydanticUserError

from gated_react.errors import exception_line
from gated_react.policy import UnsupportedResponseFormat, schema_name

Kind = Literal["tool", "provider"]


@dataclass(frozen=True)
class Structured:
    """How one graph asks for and reads its structured answer."""

    kind: Kind
    strategy: Any
    """LangChain's ``ToolStrategy`` or ``ProviderStrategy``."""
    schema: Any
    outputs: dict[str, Any] = field(default_factory=dict)
    """The tool kind's output tools, by name (LangChain's ``OutputToolBinding``s)."""

    @property
    def tools(self) -> list[BaseTool]:
        return [binding.tool for binding in self.outputs.values()]

    def bind_kwargs(self, model: BaseChatModel) -> dict[str, Any]:
        """What ``bind_tools`` is given besides the tools."""
        if self.kind == "tool":
            return {"tool_choice": "any"}
        from langchain.agents.factory import _is_openai_compatible_model

        kwargs = dict(self.strategy.to_model_kwargs())
        if _is_openai_compatible_model(model) and not getattr(model, "use_responses_api", False):
            kwargs["strict"] = True
        return kwargs

    def from_calls(self, calls: Sequence[dict[str, Any]], text: str) -> Any:
        """The answer the reply's one call of an output tool gives; raises what ``create_agent``
        raises when it does not fit (its words are what the model is told, and what a
        ``handle_errors`` of exception types is matched against)."""
        from langchain.agents.structured_output import (
            MultipleStructuredOutputsError,
            StructuredOutputValidationError,
        )

        if len(calls) > 1:
            names = [str(c.get("name")) for c in calls]
            raise MultipleStructuredOutputsError(names, AIMessage(text))
        name = str(calls[0].get("name"))
        try:
            return self.outputs[name].parse(calls[0].get("args") or {})
        except Exception as exc:
            raise StructuredOutputValidationError(name, exc, AIMessage(text)) from exc

    def from_text(self, text: str, reply: AIMessage) -> Any:
        """The answer in a final reply's text (raises when it does not fit)."""
        from langchain.agents.structured_output import ProviderStrategyBinding

        return ProviderStrategyBinding.from_schema_spec(self.strategy.schema_spec).parse(reply)

    def retry_with(self, exc: Exception) -> str | None:
        """What the model is told when its answer does not fit, or None to stop the run."""
        from langchain.agents.factory import _handle_structured_output_error

        try:
            retry, message = _handle_structured_output_error(exc, self.strategy)
        except Exception:  # the app's handle_errors raised: create_agent raises, the run stops
            return None
        if not retry or not isinstance(message, str):
            return None
        return message.encode("utf-8", "replace").decode("utf-8")  # no lone surrogate

    def said(self, answer: Any) -> str:
        """The output tool's result, as ``create_agent`` words it."""
        content = getattr(self.strategy, "tool_message_content", None)
        return content or f"Returning structured response: {answer}"


def structured_of(
    response_format: Any, model: BaseChatModel, tools: Sequence[BaseTool]
) -> Structured | None:
    """How ``response_format`` is asked for with this model (None: not at all)."""
    if response_format is None:
        return None
    from langchain.agents.factory import _supports_provider_strategy
    from langchain.agents.structured_output import (
        AutoStrategy,
        OutputToolBinding,
        ProviderStrategy,
        ToolStrategy,
    )

    strategy = response_format
    if not isinstance(strategy, ToolStrategy | ProviderStrategy | AutoStrategy):
        strategy = AutoStrategy(schema=response_format)
    try:
        if isinstance(strategy, AutoStrategy):
            provider = _supports_provider_strategy(model, tools=list(tools))
            strategy = (ProviderStrategy if provider else ToolStrategy)(schema=strategy.schema)
        if isinstance(strategy, ProviderStrategy):
            return Structured("provider", strategy, strategy.schema)
        outputs = {
            spec.name: OutputToolBinding.from_schema_spec(spec) for spec in strategy.schema_specs
        }
    except PydanticUserError as exc:  # a schema pydantic cannot read (a typing.TypedDict < 3.12)
        said = exception_line(exc, first_only=True)
        raise UnsupportedResponseFormat(
            f"response_format {schema_name(strategy.schema)}: {said}"
        ) from None
    return Structured("tool", strategy, strategy.schema, outputs)
