"""What a node reads: the channels as models, validated as ``State(**channels)`` validates them,
each value once. A value a node wrote is validated by the first node that reads it; the next
takes the same form. An edit (a new object) is validated, and it is the edit a node works from."""

from __future__ import annotations

import uuid
from typing import Any, get_type_hints

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import ValidationError

from gated_react import Budget, Policy, build_graph
from gated_react._engine.reads import KEPT, _Forms, read
from gated_react.nodes.decide import Channels
from gated_react.nodes.execute import ExecuteChannels
from gated_react.nodes.finish import FinishChannels
from gated_react.nodes.gate import GateChannels
from gated_react.nodes.observe import ObserveChannels
from gated_react.nodes.stop import StopChannels
from gated_react.nodes.validate import ValidateChannels
from gated_react.state import CoreState, HistoryEntry, State, Usage
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.helpers import REFUND_42, REFUND_GOAL

READS = {
    "decide": Channels,
    "validate": ValidateChannels,
    "gate": GateChannels,
    "execute": ExecuteChannels,
    "observe": ObserveChannels,
    "finish": FinishChannels,
    "stop": StopChannels,
}


def _core(channels: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in channels.items() if k in CoreState.model_fields}


def _channels(steps: int = 3) -> dict[str, Any]:
    """The channels of a finished run, as a store gives them back."""
    replies = [call("search_policy", query=f"refund {i}") for i in range(steps)] + ["done"]
    graph = build_graph(
        ScriptedChatModel(replies=replies), SUPPORT_TOOLS, checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    graph.invoke({"goal": REFUND_GOAL}, config)
    return dict(graph.get_state(config).values)


def test_a_read_is_the_state_validation_builds() -> None:
    channels = _channels()
    assert channels["history"]
    assert channels["trace"]
    assert channels["messages"]
    for schema in (State, CoreState):
        mine = {k: v for k, v in channels.items() if k in schema.model_fields}
        read_now, validated = read(schema, mine), schema(**mine)
        assert read_now == validated
        assert read_now.model_fields_set == validated.model_fields_set
        assert read_now.model_dump() == validated.model_dump()
    missing = read(State, {"goal": "g"})
    assert missing == State(goal="g")
    assert missing.model_fields_set == {"goal"}


def test_a_value_read_again_is_not_validated_again() -> None:
    channels = _channels()
    first, again = read(State, channels), read(State, channels)
    assert again.usage is first.usage
    assert again.reply is first.reply
    assert all(a is b for a, b in zip(again.history, first.history, strict=True))
    # an equal value that is another object is validated on its own
    copied = read(State, {**channels, "usage": dict(channels["usage"])})
    assert copied.usage == first.usage
    assert copied.usage is not first.usage


def test_a_log_validates_only_its_new_entries() -> None:
    channels = _channels()
    before = read(State, channels).history
    entry = {"step": 9, "action": {"name": "t", "args": {}}, "observation": "x"}
    longer = read(State, {**channels, "history": [*channels["history"], entry]}).history
    assert len(longer) == len(before) + 1
    assert all(a is b for a, b in zip(longer, before, strict=False))
    assert longer[-1] == HistoryEntry.model_validate(entry)
    # an entry replaced in place of another is the one read
    replaced = [entry, *channels["history"][1:]]
    assert read(State, {**channels, "history": replaced}).history[0].step == 9


def test_what_a_node_changes_in_its_state_changes_no_later_read() -> None:
    channels = _channels()
    first = read(State, channels)
    first.history.clear()
    first.seen.append("forged")
    again = read(State, channels)
    assert len(again.history) == len(channels["history"])
    assert "forged" not in again.seen


@pytest.mark.parametrize(
    "edit",
    [
        {"usage": {"steps": "many"}},
        {"usage": None},
        {"history": [{"step": "one"}]},
        {"history": "not a list"},
        {"messages": [{"not": "a message"}]},
        {"goal": 3},
        {"seen": [1]},
        {"no_such_channel": 1},
    ],
)
def test_a_value_that_does_not_validate_fails_as_whole_state_validation_does(
    edit: dict[str, Any],
) -> None:
    known = _channels()
    read(State, known)  # the other values are known: only the edit is new
    channels = {**known, **edit}
    with pytest.raises((ValidationError, TypeError)) as mine:  # a message's discriminator
        read(State, channels)  # raises TypeError, whoever validates
    with pytest.raises((ValidationError, TypeError)) as whole:
        State.model_validate(channels)
    assert type(mine.value) is type(whole.value)
    assert str(mine.value) == str(whole.value)


def test_forms_are_bounded() -> None:
    forms, adapter = _Forms(kept=3), read.__globals__["_adapter"](Usage)
    values = [{"steps": i} for i in range(10)]
    for value in values:
        forms.one(value, adapter)
    assert len(forms._forms) == 3
    assert forms.one(values[0], adapter) == Usage(steps=0)  # forgotten, so validated again
    assert KEPT >= 4096


def test_a_node_reads_its_own_channels_and_has_no_other_field() -> None:
    """A node is handed the channels it names; its state has those fields and no other, so a
    node cannot work from a default it never read."""
    channels = _channels()
    graph = build_graph(ScriptedChatModel(replies=["x"]), SUPPORT_TOOLS).builder
    for name, reads in READS.items():
        named = set(get_type_hints(reads))
        assert named <= set(State.model_fields)
        assert graph.nodes[name].input_schema is reads
        schema = State if name == "decide" else CoreState
        state = read(schema, {k: v for k, v in channels.items() if k in named}, reads)
        assert set(vars(state)) == named
    gate_state = read(CoreState, _core(channels), GateChannels)  # beyond its own: not read
    assert gate_state.usage == CoreState(**_core(channels)).usage
    with pytest.raises(AttributeError, match="goal"):
        _ = gate_state.goal


def test_an_edit_through_the_state_api_is_what_the_next_node_reads() -> None:
    """The run's own ``usage`` was read (and kept) in this process; a caller's edit is a new
    value, validated and taken: the budget it spends stops the call waiting on approval."""
    policy = Policy(
        require_approval=frozenset({"get_user_billing"}), budget=Budget(max_tool_calls=4)
    )
    graph = build_graph(
        ScriptedChatModel(replies=REFUND_42),
        SUPPORT_TOOLS,
        policy=policy,
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": uuid.uuid4().hex}}
    graph.invoke({"goal": REFUND_GOAL}, config)
    waiting = graph.get_state(config)
    assert waiting.next == ("gate",)
    graph.update_state(config, {"usage": {**waiting.values["usage"], "tool_calls": 4}})
    ended = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert ended["stop_reason"] == "max_tool_calls"
    graph.update_state(config, {"usage": {"steps": "many"}})
    with pytest.raises(ValidationError, match=r"usage\.steps"):
        graph.invoke({"goal": "again"}, config)
