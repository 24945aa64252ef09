"""decide on hand-built state: bounded prompt, usage, and model failures as stop reasons."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage

from gated_react._engine.transcript import build_messages
from gated_react.nodes.decide import adecide, decide
from gated_react.testing import ScriptedChatModel

from ..support.fakes import HangingChatModel
from ..support.helpers import deps, history_entry, logs, node_deps, policy, state


def test_the_model_gets_the_transcript_and_the_update_counts_the_step() -> None:
    parts = deps(["ok"], context_steps=4, context_keep=1)
    history = [history_entry(i, "search_policy", f"obs {i}", query=f"q{i}") for i in range(1, 11)]
    hand_built = state(**logs(history))
    update = decide(hand_built, {}, deps=parts)
    sent = parts.model.requests[0]  # type: ignore[attr-defined]
    assert sent == build_messages(hand_built, parts.system, parts.policy, parts.protocol.replay)
    assert sent[1].content.startswith("User 42")
    assert "Earlier steps" in sent[1].content  # 10 steps, at most 4 in full: folded
    assert update["usage"]["steps"] == 11
    assert update["usage"]["tokens"] > 0
    assert update["reply"]["text"] == "ok"


def test_reply_keeps_tool_calls_and_reported_tokens() -> None:
    message = AIMessage(
        "",
        tool_calls=[{"name": "get_user_profile", "args": {"user_id": 42}, "id": "1"}],
        usage_metadata={"input_tokens": 7, "output_tokens": 3, "total_tokens": 10},
    )
    parts = deps([lambda _: message])
    update = decide(state(), {}, deps=parts)
    assert update["reply"]["tool_calls"] == [
        {"name": "get_user_profile", "args": {"user_id": 42}, "id": "1"}  # the model's id, kept
    ]


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (TimeoutError("slow"), "llm_timeout"),
        (httpx.ReadTimeout("read timed out"), "llm_timeout"),
        (ValueError("boom"), "llm_error:ValueError"),
    ],
)
def test_model_failure_is_a_stop_reason_not_an_exception(error: Exception, reason: str) -> None:
    update = decide(state(usage={"steps": 2, "seconds": 1.0}), {}, deps=deps([error]))
    assert update["stop_reason"] == reason
    assert update["message"]
    assert update["usage"]["steps"] == 3
    assert update["usage"]["seconds"] >= 1.0


def test_async_body_gives_the_same_update() -> None:
    sync = decide(state(), {}, deps=deps(["same"]))
    async_ = asyncio.run(adecide(state(), {}, deps=deps(["same"])))
    assert sync["reply"].pop("id") != async_["reply"].pop("id")  # each call's own message id
    assert sync["reply"] == async_["reply"]
    assert sync["usage"]["tokens"] == async_["usage"]["tokens"]


def test_retry_adds_a_format_reminder() -> None:
    parts = deps(["again"], protocol="text")
    retry = {"why": "no_action", "message": "no Action line", "count": 1}
    decide(state(retry=retry), {}, deps=parts)
    last = parts.model.requests[0][-1]  # type: ignore[attr-defined]
    assert "no_action" in last.content
    assert "format" in last.content


@pytest.mark.parametrize("retried", [False, True], ids=["alone", "under ModelRetryMiddleware"])
@pytest.mark.parametrize("body", ["sync", "async"])
def test_a_hung_model_ends_the_run_when_the_time_budget_runs_out(body: str, retried: bool) -> None:
    from langchain.agents.middleware import ModelRetryMiddleware

    model = HangingChatModel()
    retry = [ModelRetryMiddleware(max_retries=5, initial_delay=0.0)] if retried else []
    parts = node_deps(model, [], policy(max_seconds=5.0), retry)  # retries share the budget
    hand_built = state(usage={"steps": 1, "seconds": 4.5})
    started = time.monotonic()
    try:
        if body == "sync":
            update = decide(hand_built, {}, deps=parts)
        else:
            update = asyncio.run(adecide(hand_built, {}, deps=parts))
    finally:
        model.release.set()
    assert time.monotonic() - started < 10  # a guard: the model would hang for 60 s
    assert update["stop_reason"] == "max_seconds"
    assert "while waiting for the model" in update["message"]
    assert update["usage"]["steps"] == 2
    assert 5.0 <= update["usage"]["seconds"] < 9.5
    assert update["reply"] is None


def test_a_run_with_no_seconds_left_does_not_call_the_model() -> None:
    parts = deps(["never"], max_seconds=5.0)
    update = decide(state(usage={"seconds": 5.0}), {}, deps=parts)
    assert update["stop_reason"] == "max_seconds"
    assert parts.model.requests == []  # type: ignore[attr-defined]


def test_a_reply_middleware_made_is_the_reply_the_model_spent_counted() -> None:
    from langchain.agents.middleware import after_model

    @after_model
    def shout(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(last.text.upper(), id=last.id)]}  # no token counts

    counts: list[tuple[int, int]] = []
    for middleware in ([], [shout]):
        parts = node_deps(ScriptedChatModel(replies=["quiet"]), [], policy(), middleware)
        update = decide(state(), {}, deps=parts)
        counts.append((update["usage"]["input_tokens"], update["usage"]["output_tokens"]))
    assert update["reply"]["text"] == "QUIET"
    assert counts[0] == counts[1]  # what the model reported, not the rewritten message
    assert counts[1][0] > 0
