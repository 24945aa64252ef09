"""Property-based fuzzing of the action parsers and the contract, all three protocols.

Invariant: whatever the model sends, the result is an action that every store can hold, or an
``ActionError`` whose ``why`` is one of the documented codes; never any other exception.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from gated_react._engine.model.contract import ActionError, check_contract
from gated_react._engine.storable import MAX_NESTING, Unstorable, clean_text, plain
from gated_react.nodes.decide import reply_of
from gated_react.protocols import PROTOCOLS
from gated_react.state import FinalAction, Reply, ToolAction, dump

from ..support.reaping import PATIENCE
from . import tally
from .kit import WHYS, Toolkits
from .strategies import (
    PARSER_EXAMPLES,
    action_shaped,
    duplicated_json,
    json_objects,
    json_values,
    names,
    nested,
    reply_texts,
    strings,
)

SERDE = JsonPlusSerializer()
fuzz = settings(max_examples=PARSER_EXAMPLES)

REPO = Path(__file__).resolve().parents[2]  # the child runs ``-m tests.reliability...``


def outcome(protocol: str, reply: Reply, tools: Mapping[str, BaseTool]) -> ToolAction | str:
    """The action, or the why of the ActionError; any other exception fails the test."""
    tally.count(f"fuzz cases: {protocol} parser")
    try:
        action = check_contract(PROTOCOLS[protocol].candidate(reply, tools))
    except ActionError as err:
        return why_of(err)
    assert_storable(action)
    return action  # type: ignore[return-value]


def why_of(err: ActionError) -> str:
    """A documented code and a one-line message."""
    assert err.why in WHYS, err.why
    assert str(err)
    assert "\n" not in str(err)
    return err.why


def assert_storable(action: ToolAction | FinalAction) -> None:
    """What the state would hold: plain JSON, UTF-8 encodable, unchanged by a store round trip."""
    data = dump(action)
    json.dumps(data, allow_nan=False, ensure_ascii=False).encode("utf-8")
    assert SERDE.loads_typed(SERDE.dumps_typed(data)) == data
    if isinstance(action, FinalAction):
        assert action.answer.strip()
    else:
        assert action.name
        assert action.name.strip() == action.name


@pytest.fixture(scope="module")
def registry(toolkits: Toolkits) -> dict[str, BaseTool]:
    return {tool.name: tool for tool in toolkits.tools}


@fuzz
@given(text=reply_texts())
def test_json_protocol_on_any_text(text: str) -> None:
    outcome("json", Reply(text=text), {})


@fuzz
@given(text=reply_texts())
def test_text_protocol_on_any_text(text: str, registry: dict[str, BaseTool]) -> None:
    outcome("text", Reply(text=text), registry)


@fuzz
@given(
    text=strings,
    calls=st.lists(st.tuples(strings | st.sampled_from(["calculate", "search"]), json_objects)),
    broken=st.lists(st.tuples(strings, strings), max_size=2),
)
def test_tools_protocol_on_any_message(
    text: str, calls: list[tuple[str, dict[str, Any]]], broken: list[tuple[str, str]]
) -> None:
    """Through decide's own reply building, as a chat model's message arrives."""
    message = AIMessage(
        text,
        tool_calls=[{"name": n, "args": a, "id": f"c{i}"} for i, (n, a) in enumerate(calls)],
        invalid_tool_calls=[
            {"name": n, "args": a, "id": "x", "error": "bad", "type": "invalid_tool_call"}
            for n, a in broken
        ],
    )
    result = outcome("tools", reply_of(message), {})
    if len(calls) + len(broken) > 1:
        assert result == "multiple_actions"
    elif broken:
        assert result == "bad_json"
    elif calls:
        assert result == expected_call(*calls[0])
    else:
        answer = clean_text(text).strip()
        assert result == (FinalAction(answer=answer) if answer else "missing_answer")


def expected_call(name: str, args: dict[str, Any]) -> ToolAction | str:
    """One call: its action, or the why for a blank name or arguments no store could hold."""
    try:
        stored = plain(args)
    except Unstorable:
        return "bad_json"
    name = clean_text(name).strip()
    return ToolAction(name=name, args=stored) if name else "missing_tool_name"


@fuzz
@given(calls=st.lists(st.fixed_dictionaries({"name": names, "args": json_values}), max_size=2))
def test_tools_protocol_on_raw_calls(calls: list[dict[str, Any]]) -> None:
    """Numbers, lists or nothing as names, any JSON as args: the contract still decides."""
    outcome("tools", Reply(tool_calls=calls), {})


def expected(candidate: Any) -> str | None:
    """The contract as the docs state it, written out independently: the why, or None."""
    if not isinstance(candidate, dict):
        return "not_object"
    kind = candidate.get("kind")
    if kind == "final":
        return _expected_final(candidate)
    if kind == "tool":
        return _expected_tool(candidate)
    return "bad_kind"


def _expected_final(candidate: dict[str, Any]) -> str | None:
    answer = candidate.get("answer")
    if set(candidate) - {"kind", "answer"}:
        return "extra_keys"
    return None if isinstance(answer, str) and answer.strip() else "missing_answer"


def _expected_tool(candidate: dict[str, Any]) -> str | None:
    name, args = candidate.get("name"), candidate.get("args")
    problem = None
    if set(candidate) - {"kind", "name", "args"}:
        problem = "extra_keys"
    elif not isinstance(name, str) or not name.strip():
        problem = "missing_tool_name"
    elif args is not None and not isinstance(args, dict):
        problem = "bad_args"
    else:
        try:
            plain(args)  # the documented storage limits: 64-bit integers, 64 levels
        except Unstorable:
            problem = "bad_args"
    return problem


@fuzz
@given(candidate=action_shaped() | json_values)
def test_check_contract_matches_the_documented_contract(candidate: Any) -> None:
    tally.count("fuzz cases: contract")
    try:
        action: Any = check_contract(candidate)
    except ActionError as err:
        action = err
    if isinstance(action, ActionError):
        assert action.why == expected(candidate)
    else:
        assert expected(candidate) is None
        assert_storable(action)


@fuzz
@given(text=duplicated_json())
def test_duplicate_keys_are_bad_json_in_every_text_protocol(text: str) -> None:
    assert outcome("json", Reply(text=text), {}) == "bad_json"
    assert outcome("text", Reply(text=f"Action: calculate\nAction Input: {text}"), {}) == "bad_json"


@fuzz
@given(
    depth=st.integers(1, 3000),
    kind=st.sampled_from(["list", "dict"]),
    protocol=st.sampled_from(["json", "text", "tools"]),
)
def test_nesting_is_accepted_up_to_the_limit_and_refused_beyond(
    depth: int, kind: str, protocol: str
) -> None:
    args = {"a": nested(depth, kind)}
    if protocol == "tools":
        reply = reply_of(AIMessage("", tool_calls=[{"name": "t", "args": args, "id": "1"}]))
    else:
        text = json.dumps({"kind": "tool", "name": "t", "args": args}) if depth < 900 else ""
        if depth >= 900:  # json.dumps itself recurses; write the text by hand
            inner = ("[" * depth + "]" * depth) if kind == "list" else '{"k":' * (depth - 1)
            inner = inner if kind == "list" else inner + "{}" + "}" * (depth - 1)
            text = '{"kind": "tool", "name": "t", "args": {"a": ' + inner + "}}"
        if protocol == "text":
            text = "Action: t\nAction Input: " + text[text.index('{"a"') : -1]
        reply = Reply(text=text)
    result = outcome(protocol, reply, {})
    if depth <= MAX_NESTING - 2:
        assert isinstance(result, ToolAction)
    elif depth >= MAX_NESTING:
        assert result == "bad_json"


def test_one_megabyte_of_hostile_output_parses_within_the_bound() -> None:
    """Adversarial 1 MB replies for every protocol, parsed in a child process: a parser that
    went super-linear (catastrophic regex backtracking, quadratic loops) would run for minutes
    and be killed at the ceiling; the measured times go into the summary."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.reliability.big_inputs"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) >= 20
    for row in rows:
        assert row["result"] == "action" or row["result"] in WHYS, row
        assert row["bytes"] >= 1_000_000
    tally.count("1 MB inputs parsed", len(rows))
    worst = max(rows, key=lambda row: row["seconds"])
    tally.record("1 MB parse: worst case (s)", f"{worst['seconds']:.3f} {worst['case']}")
    tally.record("1 MB parse: total (s)", f"{sum(row['seconds'] for row in rows):.3f}")
