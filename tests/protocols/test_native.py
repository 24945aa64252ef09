from __future__ import annotations

import asyncio

import pytest
from langchain_core.language_models.fake_chat_models import (
    FakeMessagesListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from gated_react import build_graph
from gated_react._engine.model.contract import ActionError
from gated_react.protocols.native import ToolsProtocol, one_call_per_reply
from gated_react.state import Reply
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.results import ainvoked, invoked

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


@pytest.mark.parametrize("model_class", [GenericFakeChatModel, FakeMessagesListChatModel])
@pytest.mark.parametrize("body", ["invoke", "ainvoke"])
def test_langchains_fake_models_without_bind_tools_run(model_class: type, body: str) -> None:
    """They cannot bind tools but reply with tool calls: they are used as they are."""
    script = [
        AIMessage(
            "", tool_calls=[{"name": "get_user_profile", "args": {"user_id": 42}, "id": "1"}]
        ),
        AIMessage("Ada is on the pro plan."),
    ]
    if model_class is GenericFakeChatModel:
        model = GenericFakeChatModel(messages=iter(script))
    else:
        model = FakeMessagesListChatModel(responses=script)
    graph = build_graph(model, SUPPORT_TOOLS)
    goal = {"goal": "Which plan is user 42 on?"}
    out = invoked(graph, goal) if body == "invoke" else asyncio.run(ainvoked(graph, goal))
    assert (out["status"], out["answer"]) == ("ok", "Ada is on the pro plan.")
    assert [entry["action"]["name"] for entry in out["history"]] == ["get_user_profile"]


def test_one_call_per_reply_is_asked_only_where_bind_tools_takes_it() -> None:
    assert one_call_per_reply(ScriptedChatModel(replies=[])) == {}
    openai = ChatOpenAI(api_key=SecretStr("sk-test"), base_url="http://127.0.0.1:9")
    assert one_call_per_reply(openai) == {"parallel_tool_calls": False}
