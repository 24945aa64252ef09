"""observe: what the step's results mean for the run. A call that stopped it (``execute``
said so in the step) ends it; a step whose every call is to a ``return_direct`` tool that ran
ends it with their results as the answer, as ``create_agent`` ends there; otherwise the model
decides again (``decide`` checks the budgets first)."""

from __future__ import annotations

from typing import Any, TypedDict

from gated_react._engine.authority.ledger import Place
from gated_react._engine.conversation.step_channel import stored
from gated_react._engine.conversation.steps import step_of
from gated_react._engine.deps import NodeDeps
from gated_react.errors import MisroutedStep
from gated_react.state import Answer, Step


class ObserveChannels(TypedDict, total=False):
    """The channels observe reads, as stored."""

    step: dict[str, Any] | None


def observe(state: ObserveChannels, *, deps: NodeDeps) -> dict[str, Any]:
    """Route on the step's results: writes nothing, unless the run ends on a direct result."""
    Place.reread()  # a pass resumed here: decide reads the thread anew
    step = step_of(state, "observe")
    if step.ending is not None:
        return {}
    if not step.calls or any(c.outcome is None and c.shown is None for c in step.calls):
        raise MisroutedStep("observe", "with calls that never ran and no stop")
    direct = _direct(deps, step)
    return {} if direct is None else {"step": stored(step.model_copy(update={"answer": direct}))}


def _direct(deps: NodeDeps, step: Step) -> Answer | None:
    """The answer after a step whose calls are all to ``return_direct`` tools and all ran (a
    human's answer in place of one did not): their results."""
    calls = step.calls
    if not deps.direct or not all(c.tool in deps.direct for c in calls):
        return None
    if not all(c.outcome is not None and c.outcome.ok for c in calls):
        return None
    return Answer(text="\n\n".join(c.outcome.text for c in calls if c.outcome), direct=True)
