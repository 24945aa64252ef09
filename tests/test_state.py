"""State survives the checkpointer's serializer and a real SQLite checkpointer, unchanged; it is
small (``create_agent``'s keys, the run's end, the input goal and the step in hand) and what a
client reads of it is the public part."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.types import Command

from gated_react import build_graph
from gated_react.state import (
    CHANNELS,
    PUBLIC,
    RESULT_KEYS,
    SUMMARY_KEYS,
    RunInput,
    RunInputDict,
    RunResult,
    State,
    Status,
    ThreadResult,
    Usage,
    UsageDict,
    conversation,
)
from gated_react.state.conversation import add_messages_fast as _add_messages
from gated_react.state.input_ids import with_input_ids
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from .support.helpers import REFUND_42, REFUND_GOAL


def test_every_channel_round_trips_through_the_serializer(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "runs.sqlite", check_same_thread=False)
    saver = SqliteSaver(conn)
    graph = build_graph(ScriptedChatModel(replies=REFUND_42), SUPPORT_TOOLS, checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "serde"}}
    graph.invoke({"goal": REFUND_GOAL}, config)
    stored = saver.get_tuple(config)
    assert stored is not None
    values = stored.checkpoint["channel_values"]
    assert set(values) <= set(CHANNELS)
    serde = JsonPlusSerializer()
    for name, value in values.items():
        assert serde.loads_typed(serde.dumps_typed(value)) == value, name
        if name != "messages":
            assert isinstance(value, dict | list | str | int | float | bool | type(None)), name
    assert values["stop_reason"] == "success"
    assert graph.get_state(config).values["stop_reason"] == "success"
    conn.close()


def test_the_state_is_small_and_a_client_reads_its_public_part(tmp_path: Path) -> None:
    """Issue 43: at most 8 channels (23 before); ``get_state`` shows and ``invoke`` returns
    ``create_agent``'s keys and the run's end, not the step in hand; a goal is the
    conversation's question, not a channel a reader sees."""
    assert len(CHANNELS) <= 8
    assert set(PUBLIC) <= set(CHANNELS)
    assert set(CHANNELS) - set(PUBLIC) == {"goal", "step"}
    with sqlite3.connect(tmp_path / "runs.sqlite", check_same_thread=False) as conn:
        graph = build_graph(
            ScriptedChatModel(replies=REFUND_42), SUPPORT_TOOLS, checkpointer=SqliteSaver(conn)
        )
        config: Any = {"configurable": {"thread_id": "t"}}
        out = graph.invoke({"goal": REFUND_GOAL}, config)
        shown = graph.get_state(config).values
    assert set(out) <= set(PUBLIC)
    assert {"messages", "status", "stop_reason", "message"} <= set(out)
    assert set(shown) <= set(PUBLIC)
    assert out["messages"][0].type == "human"
    assert out["messages"][0].content == REFUND_GOAL


def test_state_read_back_in_a_new_saver_equals_the_result(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with sqlite3.connect(path, check_same_thread=False) as conn:
        graph = build_graph(
            ScriptedChatModel(replies=REFUND_42), SUPPORT_TOOLS, checkpointer=SqliteSaver(conn)
        )
        out = graph.invoke({"goal": REFUND_GOAL}, {"configurable": {"thread_id": "t"}})
    with sqlite3.connect(path, check_same_thread=False) as conn:
        reader = build_graph(
            ScriptedChatModel(replies=[]), SUPPORT_TOOLS, checkpointer=SqliteSaver(conn)
        )
        values = reader.get_state({"configurable": {"thread_id": "t"}}).values
    assert {k: values[k] for k in out} == out


def _stored_bytes(tmp_path: Path, steps: int) -> int:
    """What a run of ``steps`` tool steps with 1 KB results leaves in a SQLite store."""
    from langchain_core.tools import tool

    from gated_react import Policy
    from gated_react.testing import call

    @tool
    def blob(n: int) -> str:
        """A 1 KB result."""
        return f"{n:04d}" + "x" * 1020

    path = tmp_path / f"runs-{steps}.sqlite"
    model = ScriptedChatModel(replies=[*(call("blob", n=i) for i in range(steps)), "done"])
    policy = Policy().replace(max_steps=steps + 1, max_tool_calls=steps + 1)
    with sqlite3.connect(path, check_same_thread=False) as conn:
        graph = build_graph(model, [blob], policy=policy, checkpointer=SqliteSaver(conn))
        out = graph.invoke({"goal": "go"}, {"configurable": {"thread_id": "t"}})
        assert len(out["messages"]) == 2 * steps + 2  # every call and its result
        rows = conn.execute(
            "SELECT (SELECT sum(length(checkpoint)) FROM checkpoints)"
            " + (SELECT sum(length(value)) FROM writes)"
        ).fetchone()
    return int(rows[0])


def test_messages_with_every_tool_step_grow_the_store_linearly(tmp_path: Path) -> None:
    """``messages`` holds each step's call and result: as a plain ``add_messages`` channel each
    checkpoint stored the whole conversation again (measured: 11.3 MB after 50 steps, 41.8 MB
    after 100); as a delta channel, 1.6 MB and 3.4 MB."""
    short, long = _stored_bytes(tmp_path, 20), _stored_bytes(tmp_path, 40)
    assert long < 2.4 * short  # twice the steps: about twice the bytes, not four times


def test_usage_dict_is_usage_field_by_field() -> None:
    """One declaration: the TypedDict view of ``Usage`` (what results hold) has its fields, in
    its order, with its types; a field added to one and not the other fails here."""
    view = get_type_hints(UsageDict)
    assert list(view) == list(Usage.model_fields)
    assert view == {name: field.annotation for name, field in Usage.model_fields.items()}


def test_the_results_share_their_keys_with_the_state() -> None:
    """``ThreadResult`` is ``RunResult``'s keys, what the run's conversation and record say of
    it (its answer, history, trace, usage), the thread and its questions; the keys that say
    how a run ended have one type in ``RunResult`` and ``ThreadResult`` (which adds
    ``paused``, a status no state holds)."""
    thread = get_type_hints(ThreadResult)
    run = get_type_hints(RunResult)
    derived = {"answer", "history", "trace", "usage"}
    assert set(thread) == {*RESULT_KEYS, *derived, "thread_id", "pending"}
    assert list(RESULT_KEYS) == list(RunResult.model_fields)
    assert thread["usage"] is UsageDict
    for key in set(SUMMARY_KEYS) - {"status", "answer"}:
        assert thread[key] == run[key], key
    statuses = {arg for part in get_args(thread["status"]) for arg in get_args(part)}
    assert statuses == {*get_args(Status), "paused"}
    assert type(None) in get_args(thread["status"])


def test_run_result_is_the_states_public_channels_with_their_types() -> None:
    """``RunResult`` declares what ``invoke`` returns: each key a public channel of ``State``,
    of the same type (its reducer aside)."""
    run = get_type_hints(RunResult)
    state = get_type_hints(State)
    assert set(RESULT_KEYS) == set(PUBLIC)
    assert {key: state.get(key) for key in RESULT_KEYS} == run


def test_run_input_dict_has_run_inputs_keys() -> None:
    """The plain-dict input apps pass is ``RunInput``'s fields, no more and no fewer."""
    assert set(get_type_hints(RunInputDict)) == set(RunInput.model_fields)


def _fold(current: list[Any], writes: list[Any]) -> list[Any]:
    out = list(current)
    for batch in writes:
        out = list(add_messages(out, batch))
    return out


def _shape(messages: list[Any]) -> list[tuple[str, Any, Any]]:
    """What a message list holds, ids that add_messages makes up (uuid4) left out."""
    return [
        (m.type, m.content, m.id if not _MADE_UP.fullmatch(str(m.id)) else "made") for m in messages
    ]


_MADE_UP = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[45][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
"""An id made up for a message that came without one (uuid4 by add_messages, uuid5 here)."""


@pytest.mark.parametrize(
    "writes",
    [
        [[AIMessage("a", id="3")]],
        [[AIMessage("a", id="3"), ToolMessage("r", tool_call_id="c", id="4")]],
        [[AIMessage("a", id="3")], [ToolMessage("r", tool_call_id="c", id="4")]],
        [[AIMessage("again", id="2")]],  # replaces a message under its id
        [[AIMessage("a", id="3"), AIMessage("b", id="3")]],  # the later wins
        [[RemoveMessage(id="1")]],
        [[RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("fresh", id="9")]],
        [[AIMessage("no id")]],
        [[("user", "a tuple")]],
        [[{"role": "assistant", "content": "a dict", "id": "7"}]],
        [[AIMessageChunk("a chunk", id="8")]],
        [AIMessage("a lone message", id="5")],
        [[]],
    ],
)
def test_the_conversations_reducer_is_add_messages(writes: list[Any]) -> None:
    """The fast append (every new message with a new id of its own) and the fold of
    ``add_messages`` give the same conversation, whatever is written."""
    current = [HumanMessage("goal", id="1"), AIMessage("said", id="2")]
    mine, theirs = _add_messages(list(current), writes), _fold(list(current), writes)
    assert _shape(mine) == _shape(theirs)
    assert all(type(a) is type(b) for a, b in zip(mine, theirs, strict=True))


def test_a_message_without_an_id_gets_the_same_id_each_time_its_write_is_replayed() -> None:
    """A DeltaChannel folds a checkpoint's writes again at every read: a chat input without
    an id (a tuple, a dict, a message) must come back under the same id each time, since a
    run is named by its question's id."""
    current = [HumanMessage("goal", id="1")]
    writes = [[("user", "a tuple"), {"role": "user", "content": "a dict"}, HumanMessage("m")]]
    first, again = _add_messages(list(current), writes), _add_messages(list(current), writes)
    assert [m.id for m in first] == [m.id for m in again]
    assert all(_MADE_UP.fullmatch(str(m.id)) for m in first[1:])
    assert len({m.id for m in first}) == 4


def test_a_message_written_back_as_its_dump_is_revived_whole() -> None:
    """LangGraph's server replays the conversation's writes as dicts (each message's
    ``model_dump()``). Before, ``add_messages`` took them for chat input and moved what it does
    not name into ``additional_kwargs``: a chat UI read no ``usage_metadata``."""
    said = AIMessage(
        "hi",
        id="3",
        tool_calls=[{"name": "t", "args": {}, "id": "c", "type": "tool_call"}],
        invalid_tool_calls=[{"name": "u", "args": "{", "id": "d", "error": "bad", "type": "x"}],
        usage_metadata={"input_tokens": 2, "output_tokens": 1, "total_tokens": 3},
        response_metadata={"finish_reason": "tool_calls"},
    )
    result = ToolMessage("r", tool_call_id="c", id="4", status="error")
    current = [HumanMessage("goal", id="1")]
    stored = _add_messages(current, [[said.model_dump(), result.model_dump()]])
    assert stored == [*current, said, result]
    chat_input = {"type": "human", "content": "typed", "id": "5"}  # no dump: converted as before
    assert _add_messages(current, [[chat_input]])[-1] == HumanMessage("typed", id="5")


def test_the_conversations_reducer_remembers_ids_across_writes_and_forks() -> None:
    """The ids of the conversation it returned are remembered, not walked again per write: a
    later message under an earlier id still replaces it, a fork from an older conversation
    sees only that conversation's ids, and nothing it was given changes in place."""
    start = [HumanMessage("goal", id="1")]
    a = _add_messages(start, [[AIMessage("a", id="2")]])
    b = _add_messages(a, [[ToolMessage("r", tool_call_id="c", id="3")]])
    again = _add_messages(b, [[AIMessage("a again", id="2")]])  # replaced under its id
    assert [(m.id, m.content) for m in again] == [("1", "goal"), ("2", "a again"), ("3", "r")]
    fork = _add_messages(a, [[AIMessage("other", id="3")]])  # "3" is b's, not a's: appended
    assert [m.id for m in fork] == ["1", "2", "3"]
    assert fork[-1].content == "other"
    assert [m.id for m in start] == ["1"]
    assert [m.id for m in a] == ["1", "2"]
    assert [m.id for m in b] == ["1", "2", "3"]
    chain = b
    for n in range(4, 4 + 3 * conversation._KNOWN_MAX):  # more conversations than it remembers
        chain = _add_messages(chain, [[AIMessage(str(n), id=str(n))]])
    assert len(conversation._KNOWN) <= conversation._KNOWN_MAX
    assert _add_messages(chain, [[AIMessage("first again", id="1")]])[0].content == "first again"
    assert _shape(_add_messages(a, [[AIMessage("a", id="9")]])) == _shape(
        _fold(a, [[AIMessage("a", id="9")]])
    )


def test_the_reducer_keeps_no_conversation_that_nothing_else_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A finished run's conversation is not kept alive by the reducer's memory of its ids: a
    process that ran a thousand runs does not hold their messages."""
    monkeypatch.setattr(conversation, "_KNOWN", {})  # earlier tests' results may still be held
    for run in range(3 * conversation._KNOWN_MAX):
        chain = [HumanMessage("goal", id=f"{run}-0")]
        for n in range(1, 4):
            chain = _add_messages(chain, [[AIMessage(str(n), id=f"{run}-{n}")]])
        del chain  # the run ended: its last conversation is held by the cache alone
    assert len(conversation._KNOWN) == 1  # the last run's, until the next write
    alive = _add_messages([HumanMessage("goal", id="a")], [[AIMessage("x", id="b")]])
    other = _add_messages([HumanMessage("goal", id="c")], [[AIMessage("y", id="d")]])
    assert {id(alive), id(other)} <= set(conversation._KNOWN)  # both still held by their runs


def test_every_input_message_gets_an_id_once_and_the_callers_objects_stay_as_they_were() -> None:
    """``with_input_ids``: each form a client sends a message in (a dict, a message, a pair, a
    string, alone or in a list, in an input or a ``Command``'s update) gets an id; one with an
    id, anything that is not a message, and the caller's objects are left as they are."""
    said = {"role": "user", "content": "pay a"}
    human = HumanMessage("pay b")
    sent = {"messages": [said, human, ("user", "pay c"), "pay d"], "goal": None}
    named = with_input_ids(sent)
    ids = [m["id"] if isinstance(m, dict) else m.id for m in named["messages"]]
    assert all(ids)
    assert len(set(ids)) == 4
    assert named["goal"] is None
    assert "id" not in said
    assert human.id is None
    assert [m["content"] if isinstance(m, dict) else m.content for m in named["messages"]] == [
        "pay a", "pay b", "pay c", "pay d",
    ]  # fmt: skip
    assert with_input_ids(named) is named  # every message has its id: nothing to change
    assert with_input_ids({"messages": "hi"})["messages"].id
    # a pair sent as JSON is a list (langgraph_sdk sends ("user", ...) so): one message
    (pair,) = with_input_ids({"messages": [["user", "pay e"]]})["messages"]
    assert (pair.type, pair.content) == ("human", "pay e")
    assert pair.id
    # a list of two strings is two messages, as add_messages reads it
    assert [m.content for m in with_input_ids({"messages": ["user", "hi"]})["messages"]] == [
        "user", "hi",
    ]  # fmt: skip
    assert with_input_ids({"goal": "pay a"}) == {"goal": "pay a"}
    assert with_input_ids(None) is None
    odd = {"messages": [{"no": "role"}, 3]}
    assert with_input_ids(odd) is odd  # left for the reducer to refuse
    pairs = with_input_ids(Command(update=[("messages", [said]), ("goal", None)], goto="decide"))
    assert pairs.update[0][1][0]["id"]
    assert (pairs.update[1], pairs.goto) == (("goal", None), "decide")
    command = with_input_ids(Command(resume={"approved": True}, update={"messages": [said]}))
    assert command.resume == {"approved": True}
    assert command.update["messages"][0]["id"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_replay_of_an_input_sent_without_ids_asks_the_same_question(mode: str) -> None:
    """The input checkpoint holds the ids given when the input was sent: every replay of it
    opens the same run (LangGraph alone gives the message a new id at each replay)."""
    model = ScriptedChatModel(replies=["hello"], cycle=True)
    graph = build_graph(model, [], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    sent = {"messages": [{"role": "user", "content": "hi"}]}
    if mode == "sync":
        graph.invoke(sent, config)
    else:
        asyncio.run(graph.ainvoke(sent, config))
    asked = graph.get_state(config).values["messages"][0].id
    (started,) = [s for s in graph.get_state_history(config) if s.metadata["source"] == "input"]
    replayed = [graph.invoke(None, started.config)["messages"][0].id for _ in range(2)]
    assert replayed == [asked, asked]
