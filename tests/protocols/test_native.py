from __future__ import annotations

import pytest

from gated_react._engine.contract import ActionError
from gated_react.protocols.native import ToolsProtocol
from gated_react.state import Reply

PROTOCOL = ToolsProtocol()


def test_one_call_is_a_tool_action_and_text_is_final() -> None:
    reply = Reply(text="thinking", tool_calls=[{"name": "t", "args": {"a": 1}}])
    assert PROTOCOL.candidate(reply, {}) == {"kind": "tool", "name": "t", "args": {"a": 1}}
    assert PROTOCOL.candidate(Reply(text="done"), {}) == {"kind": "final", "answer": "done"}


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (
            Reply(tool_calls=[{"name": "a", "args": {}}, {"name": "b", "args": {}}]),
            "multiple_actions",
        ),
        (
            Reply(
                tool_calls=[{"name": "a", "args": {}}],
                invalid_tool_calls=[{"name": "b", "args": "{", "error": "x"}],
            ),
            "multiple_actions",
        ),
        (Reply(invalid_tool_calls=[{"name": "b", "args": "{oops", "error": "x"}]), "bad_json"),
    ],
)
def test_rejections(reply: Reply, why: str) -> None:
    with pytest.raises(ActionError) as err:
        PROTOCOL.candidate(reply, {})
    assert err.value.why == why
