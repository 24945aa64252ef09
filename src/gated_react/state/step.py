"""What passes between a step's nodes (``State.step``): never an authority, only the work in
hand. The gate's decisions are records in the run's ledger; this says which calls to take them
for, and what the next node is to do."""

from pydantic import Field

from gated_react.state.actions import Reply, Retry
from gated_react.state.base import StrictModel
from gated_react.state.calls import Call


class Ending(StrictModel):
    """A stop a node decided, for the ``stop`` node to write (``Stop``'s data)."""

    reason: str
    """The stop-reason string, e.g. ``tool_denied:pay``."""
    message: str
    """A human sentence with numbers."""
    call: str | None = None
    """The id of the call that stopped the run, if one did."""
    step: int | None = None
    """The model decisions made when it was decided (the step the stopping call belongs to)."""


class Answer(StrictModel):
    """A final answer that passed the contract, for ``finish`` to write."""

    text: str
    """The answer as the conversation shows it."""
    data: dict[str, object] | list[object] | None = None
    """The answer as ``response_format``'s data (plain JSON), under a schema."""
    direct: bool = False
    """True when it is a ``return_direct`` tool's result, not the model's."""
    call: dict[str, object] | None = None
    """The output tool call that gave it (``ToolStrategy``): its name, id and arguments."""
    said: str | None = None
    """That call's result, as the conversation shows it."""


class Step(StrictModel):
    """The step in hand of the run that ``run`` names."""

    run: str
    """The run it belongs to: the id of the human message the run answers."""
    reply: Reply | None = None
    """The model's latest reply (decide -> validate; kept to finish when it is the answer,
    dropped when it became calls: they are in ``calls`` and the conversation)."""
    retry: Retry | None = None
    """Set while a malformed reply is retried with a reminder."""
    calls: list[Call] = Field(default_factory=list)
    """The step's calls, in the reply's order (validate -> gate -> execute -> observe)."""
    answer: Answer | None = None
    """The final answer (validate or observe -> finish)."""
    ending: Ending | None = None
    """The stop a node decided (any node -> stop)."""
    traceparent: str | None = None
    """The W3C trace context of the last traced invocation, so a resume links to it."""
