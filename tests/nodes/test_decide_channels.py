"""Each node reads the channels it works from and no other: the graph hands a node only what
its input schema names, as stored (plain JSON). None reads ``structured_response`` (only
written); only decide reads the input ``goal`` and the end (``status``, ``stop_reason``,
``message``), which it clears when a run's first message is written."""

from __future__ import annotations

from typing import get_type_hints

import pytest

from gated_react.nodes.decide import DecideChannels
from gated_react.nodes.execute import ExecuteChannels
from gated_react.nodes.finish import FinishChannels
from gated_react.nodes.gate import GateChannels
from gated_react.nodes.observe import ObserveChannels
from gated_react.nodes.stop import StopChannels
from gated_react.nodes.validate import ValidateChannels
from gated_react.state import State

from ..test_graph import _graph

READS = {
    "decide": (DecideChannels, {"messages", "goal", "step", "status", "stop_reason", "message"}),
    "validate": (ValidateChannels, {"step"}),
    "gate": (GateChannels, {"messages", "step"}),
    "execute": (ExecuteChannels, {"messages", "step"}),
    "observe": (ObserveChannels, {"step"}),
    "finish": (FinishChannels, {"step"}),
    "stop": (StopChannels, {"messages", "step"}),
}


@pytest.mark.parametrize("node", sorted(READS))
def test_a_node_reads_only_its_channels(node: str) -> None:
    schema, channels = READS[node]
    assert set(get_type_hints(schema)) == channels
    assert channels <= set(get_type_hints(State))
    builder = _graph().builder
    assert builder.nodes[node].input_schema is schema


def test_no_node_reads_the_structured_response() -> None:
    read = set().union(*(channels for _, channels in READS.values()))
    assert read == set(get_type_hints(State)) - {"structured_response"}
