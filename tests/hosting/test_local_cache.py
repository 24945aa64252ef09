"""The transcript's promise on a real prefix-caching server: llama-server, through the real
``ChatOpenAI``, reuses every request's predecessor (a fold keeps the system prompt, the goal and
the summary before it), and the run's ``usage["cached_tokens"]`` is what the server reported.

The decisions are scripted (SmolLM2 would stop at step 3), but every request is the one
gated-react sends, and it really goes to the server: only the reply's text is replaced."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from pydantic import ConfigDict, Field

from gated_react import Policy, build_graph
from gated_react._engine.conversation.transcript import folded_count
from gated_react.hosting.local import local_chat_model, local_server

from ..support.results import invoked
from .test_local import needs_model

pytestmark = pytest.mark.local_model
LOOKUPS = 25  # the default policy folds at 13 and 24 steps shown
SEAM = 4
"""Tokens a request may re-read where the previous one ended (the chat template's closing of
the last turn can tokenize differently once the next turn follows it)."""
FOLD_SEAM = 8
"""At a fold, the first request's end of the goal turn and its reply prompt (about 6 tokens) are
not shared: the goal turn goes on with the summary."""


class RealRequestScriptedReply(BaseChatModel):
    """Sends each request to ``real`` and keeps what the server reported; replies by script."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    real: Any
    reported: list[dict[str, int]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "real-request-scripted-reply"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        usage = self.real.invoke(messages).usage_metadata
        cached = usage.get("input_token_details", {}).get("cache_read", 0)
        self.reported.append({"tokens": usage["input_tokens"], "cached": cached})
        done = len(self.reported) > LOOKUPS
        action = {"kind": "tool", "name": "lookup", "args": {"record": len(self.reported)}}
        text = json.dumps({"kind": "final", "answer": "done"} if done else action)
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(text, usage_metadata=usage))]
        )


def lookup(record: int) -> str:
    """Look up one record by its number."""
    return f"record {record}: " + ", ".join(f"field {i} is {record * i % 97}" for i in range(12))


@needs_model
def test_each_request_reuses_the_last_and_a_fold_keeps_the_goal_and_the_summary() -> None:
    policy = Policy().replace(
        protocol="json", max_steps=LOOKUPS + 1, max_tool_calls=LOOKUPS, max_seconds=900
    )
    with local_server(context=8192) as server:
        model = RealRequestScriptedReply(real=local_chat_model(server).bind(max_tokens=1))
        tool = StructuredTool.from_function(lookup)
        out = invoked(build_graph(model, [tool], policy=policy), {"goal": "Look up records 1-25."})
    sent = model.reported
    assert (out["status"], len(sent)) == ("ok", LOOKUPS + 1)
    folds = [
        n for n in range(1, len(sent)) if folded_count(n, policy) != folded_count(n - 1, policy)
    ]
    assert folds == [13, 24]
    for n in range(1, len(sent)):
        kept = sent[0]["tokens"] - FOLD_SEAM if n in folds else sent[n - 1]["tokens"] - SEAM
        assert sent[n]["cached"] >= kept, (n, sent[n], sent[n - 1])
    assert sent[folds[0]]["tokens"] < sent[folds[0] - 1]["tokens"]  # the fold shortened it
    # the second fold appends to the summary: the first fold's lines are still reused
    assert sent[folds[1]]["cached"] > sent[0]["tokens"] + 10 * 20
    assert out["usage"]["cached_tokens"] == sum(r["cached"] for r in sent)
    assert out["usage"]["cached_tokens"] > 0.8 * sum(r["tokens"] for r in sent)
