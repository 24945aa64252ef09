"""The graph's schemas for one app: the state, what ``invoke`` takes and what it returns, with
the fields an app keeps in the agent's state (``build_graph(state_schema=...)``, an
``AgentState`` subclass as ``create_agent`` takes it). The app's fields are its own channels:
passed in with the input, read by tools (``ToolRuntime.state``), returned and streamed; the
gate's channels stay the gate's (an app field named like one is refused)."""

from collections.abc import Callable
from typing import Annotated, Any, NotRequired, Required, TypedDict, get_args, get_origin

from pydantic import BaseModel, create_model

from gated_react.errors import ArgumentRefused
from gated_react.state.channels import PUBLIC, State
from gated_react.state.revived import Revived
from gated_react.state.run import RunInput, RunReply, RunResult

AGENT_STATE = frozenset({"messages", "jump_to", "structured_response", "remaining_steps"})
"""The fields of LangChain's ``AgentState``: this graph has its own of each."""


def app_fields(schema: Any) -> dict[str, Any]:
    """The fields ``schema`` adds to ``AgentState``, by name, with their types."""
    if schema is None:
        return {}
    hints = getattr(schema, "__annotations__", None)
    if not isinstance(hints, dict):
        raise ArgumentRefused(f"state_schema must be a TypedDict (an AgentState), got {schema!r}")
    try:
        from typing import get_type_hints

        hints = get_type_hints(schema, include_extras=True)
    except Exception as exc:  # a forward reference that does not resolve
        raise ArgumentRefused(f"state_schema's fields cannot be read: {exc}") from None
    fields = {name: _bare(hint) for name, hint in hints.items() if name not in AGENT_STATE}
    langgraphs = sorted(n for n in fields if ":" in n or n.startswith("__"))
    if langgraphs:  # branch:to:<node>, __interrupt__, ...: LangGraph's own channels
        raise ArgumentRefused(
            f"state_schema names {', '.join(langgraphs)}, which LangGraph keeps for itself "
            "(a name with ':' or starting with '__'): name your fields otherwise"
        )
    taken = sorted(set(fields) & set(State.__annotations__))
    if taken:
        raise ArgumentRefused(
            f"state_schema names {', '.join(taken)}, which are gated-react's own channels: "
            "name your fields otherwise"
        )
    return fields


def _bare(hint: Any) -> Any:
    """A field's type without ``Required``/``NotRequired`` (every field here is optional)."""
    return get_args(hint)[0] if get_origin(hint) in (Required, NotRequired) else hint


class Schemas:
    """The state, input and output schemas, and the public channels, for an app's fields."""

    def __init__(self, fields: dict[str, Any], revive: Callable[[Any], Any] | None = None) -> None:
        self.fields = fields
        structured = revive is not None
        output = RunResult if structured else RunReply
        self.public = [*(k for k in PUBLIC if structured or k != "structured_response"), *fields]
        if not fields and not structured:
            self.state: Any = State
            self.input: type[BaseModel] = RunInput
            self.output: type[BaseModel] = output
            return
        channels = dict(State.__annotations__)
        if structured:  # the answer stored as JSON, read as the schema's object
            channels["structured_response"] = Annotated[Any, Revived(Any, revive=revive)]
        self.state = TypedDict("State", {**channels, **fields}, total=False)  # type: ignore[misc]
        self.input, self.output = RunInput, output
        if fields:  # the app's fields, optional, in what invoke takes and returns
            extra: Any = {name: (_plain(hint) | None, None) for name, hint in fields.items()}
            self.input = create_model("RunInput", __base__=RunInput, **extra)
            self.output = create_model(output.__name__, __base__=output, **extra)


def _plain(hint: Any) -> Any:
    """A type pydantic can describe for a schema (an ``Annotated`` reducer stripped)."""
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint
