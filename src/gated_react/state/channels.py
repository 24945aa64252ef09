"""The graph's state: what LangGraph stores for a thread, channel by channel.

LangChain's own keys as ``create_agent`` keeps them (``messages``, ``structured_response``), the
run's end (``status``, ``stop_reason``, ``message``), the input ``goal``, and the step in hand
(``step``). Nothing here decides whether a call runs: that is the run's record, beside the
checkpoints (``_engine/authority``). What can be derived is: the history from ``messages``, the
trace, usage and spend from the record, the answer from the last message.

``messages`` is a ``DeltaChannel``: a checkpoint stores the new messages, not the conversation
again, so storage grows linearly with a run.
"""

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.channels import DeltaChannel

from gated_react.state.conversation import add_messages_fast
from gated_react.state.run import Status

PUBLIC = ("messages", "structured_response", "status", "stop_reason", "message")
"""The channels a client reads (streamed, shown in ``get_state``, returned by ``invoke``)."""


class State(TypedDict, total=False):
    """Every channel of the graph."""

    messages: Annotated[list[AnyMessage], DeltaChannel(add_messages_fast)]
    """The conversation, across runs, as ``create_agent`` stores it: each run's question, an
    AI message per step with its tool calls, one ``ToolMessage`` per call, the answer (or, for
    a run that stopped, why, as the agent says it)."""
    structured_response: Any
    """The answer as ``response_format``'s data, after a final answer under a schema."""
    status: Status | None
    """``ok`` after a final answer, ``stopped`` after any other end; None while unfinished
    (or from the thread's previous run, until the next run's first message)."""
    stop_reason: str | None
    """Why the run ended, e.g. ``success`` or ``tool_denied:pay``."""
    message: str | None
    """A sentence about the end, with numbers."""
    goal: str | None
    """A run's input as text (``{"goal": ...}``); the run's first decision makes it the
    conversation's human message and clears it."""
    step: dict[str, Any] | None
    """The step in hand (``Step`` as plain JSON): what one node hands the next."""


CHANNELS = tuple(State.__annotations__)
"""Every channel, in order: what a caller that needs the private writes streams
(``graph.stream(..., output_keys=list(CHANNELS))``; the CLI's live view does)."""
