"""What a node reads: the channels as models, validated as ``State(**channels)`` validates them,
each value once in a run. A value a node wrote is validated by the first node that reads it; the
next takes the same form. An edit (a new object) is validated, and it is the edit a node works
from. What a run kept goes when it ends: nothing outlives the runs that read it."""

from __future__ import annotations

import uuid
from typing import Any, get_type_hints

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import ValidationError

from gated_react import Budget, Policy, build_graph
from gated_react._engine.reads import RUNS, THREADS, Known, _adapter, _Runs, read
from gated_react.nodes.decide import Channels
from gated_react.nodes.execute import ExecuteChannels
from gated_react.nodes.finish import FinishChannels
from gated_react.nodes.gate import GateChannels
from gated_react.nodes.observe import ObserveChannels
from gated_react.nodes.stop import StopChannels
from gated_react.nodes.validate import ValidateChannels
from gated_react.state import CoreState, HistoryEntry, State
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


def _config() -> Any:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


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


def test_a_value_read_again_in_a_run_is_not_validated_again() -> None:
    channels, config = _channels(), _config()
    first, again = read(State, channels, None, config), read(State, channels, None, config)
    assert again.usage is first.usage
    assert again.reply is first.reply
    assert all(a is b for a, b in zip(again.history, first.history, strict=True))
    # an equal value that is another object is validated on its own
    copied = read(State, {**channels, "usage": dict(channels["usage"])}, None, config)
    assert copied.usage == first.usage
    assert copied.usage is not first.usage
    # another thread's run, or a node called by hand, validates it again
    assert read(State, channels, None, _config()).usage is not first.usage
    assert read(State, channels).usage is not read(State, channels).usage


def test_a_log_validates_only_its_new_entries() -> None:
    channels, config = _channels(), _config()
    before = read(State, channels, None, config).history
    entry = {"step": 9, "action": {"name": "t", "args": {}}, "observation": "x"}
    longer = read(State, {**channels, "history": [*channels["history"], entry]}, None, config)
    assert len(longer.history) == len(before) + 1
    assert all(a is b for a, b in zip(longer.history, before, strict=False))
    assert longer.history[-1] == HistoryEntry.model_validate(entry)
    # an entry replaced in place of another is the one read
    replaced = [entry, *channels["history"][1:]]
    assert read(State, {**channels, "history": replaced}, None, config).history[0].step == 9


def test_what_a_node_changes_in_its_state_changes_no_later_read() -> None:
    channels, config = _channels(), _config()
    first = read(State, channels, None, config)
    first.history.clear()
    first.seen.append("forged")
    again = read(State, channels, None, config)
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
    known, config = _channels(), _config()
    read(State, known, None, config)  # the other values are known: only the edit is new
    channels = {**known, **edit}
    with pytest.raises((ValidationError, TypeError)) as mine:  # a message's discriminator
        read(State, channels, None, config)  # raises TypeError, whoever validates
    with pytest.raises((ValidationError, TypeError)) as whole:
        State.model_validate(channels)
    assert type(mine.value) is type(whole.value)
    assert str(mine.value) == str(whole.value)


def test_a_run_keeps_what_it_read_until_it_ends() -> None:
    """A finished run (finish or stop) leaves nothing; a paused one keeps its own until newer
    runs push it out, so a process keeps no more than its runs in flight."""
    before = len(RUNS)
    for goal in ("one", "two", "three"):
        graph = build_graph(ScriptedChatModel(replies=["done"]), SUPPORT_TOOLS)
        graph.invoke({"goal": goal}, _config())
    assert len(RUNS) == before
    runs, config = _Runs(threads=2), _config()
    assert runs.of(config) is runs.of(config)
    for _ in range(3):
        runs.of(_config())
    assert len(runs) == 2
    assert THREADS >= 256
    runs.end(_config())
    assert len(runs) == 2
    assert isinstance(runs.of(None), Known)
    assert runs.of(None) is not runs.of(None)


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
        state = read(schema, {k: v for k, v in channels.items() if k in named}, reads, _config())
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


def test_in_a_run_each_history_entry_is_validated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The nodes of one run share what they read (one thread, across tasks): a run of N steps
    validates N history entries, where validating the whole log each step took N * (N + 1) / 2."""
    validated: list[int] = []
    adapter = _adapter(list[HistoryEntry])
    real = adapter.validate_python

    def counting(value: Any, *args: Any, **kwargs: Any) -> Any:
        validated.append(len(value))
        return real(value, *args, **kwargs)

    monkeypatch.setattr(adapter, "validate_python", counting)
    steps = 12
    replies = [call("search_policy", query=f"refund {i}") for i in range(steps)] + ["done"]
    policy = Policy(budget=Budget(max_steps=steps + 1, max_tool_calls=steps))
    graph = build_graph(ScriptedChatModel(replies=replies), SUPPORT_TOOLS, policy=policy)
    out = graph.invoke({"goal": REFUND_GOAL}, _config())
    assert len(out["history"]) == steps
    assert sum(validated) == steps


def test_a_log_changed_in_place_is_validated_again() -> None:
    """No node changes a channel's list in place; should anything, the change is validated, not
    taken for the entries read before it."""
    channels, config = _channels(), _config()
    history = list(channels["history"])
    read(State, {**channels, "history": history}, None, config)
    history.append({"step": "not a step"})
    with pytest.raises(ValidationError):
        read(State, {**channels, "history": history}, None, config)
