"""What a reply reports about its own usage cannot break budgets or runs: a count that is not a
non-negative integer is ignored and estimated (and the figures say so), a huge one is capped,
and none ever lowers what the run has spent. The figures are the run's record (what each model
call was paid), read back as the budgets read it."""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from gated_react import Budget, Policy, build_graph, open_checkpointer, read, result_of
from gated_react._engine.model.pricing import Pricer
from gated_react._engine.model.tokens import TOKEN_CAP
from gated_react.nodes.decide import decide
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.helpers import deps, state
from .hand import saved, usage

GOOD = {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}


def _reply(usage: dict[str, Any], tool: bool = True) -> AIMessage:
    """A reply carrying ``usage`` as its usage_metadata, whatever its types (set after
    construction, as a model class that skips validation would hand it over)."""
    calls = [{"name": "get_user_profile", "args": {"user_id": 42}, "id": uuid.uuid4().hex}]
    message = AIMessage("" if tool else "done", tool_calls=calls if tool else [])
    message.usage_metadata = usage  # type: ignore[assignment]
    return message


def _decided(message: AIMessage) -> dict[str, Any]:
    """The run's usage, as its record holds it, after one decision that got ``message``."""
    parts = deps([lambda _: message])
    object.__setattr__(parts, "bound", GenericFakeChatModel(messages=iter([message])))
    config = saved()
    decide(state(), config, deps=parts)
    return usage(config).model_dump(mode="json")


@pytest.mark.parametrize(
    "total",
    [-(10**9), -1, 0, None, "12", 12.5, True, [3]],
    ids=["-1e9", "-1", "0", "missing", "str", "float", "bool", "list"],
)
def test_a_total_that_is_no_count_is_estimated_and_said_so(total: Any) -> None:
    usage = {**GOOD} if total is None else {**GOOD, "total_tokens": total}
    if total is None:
        del usage["total_tokens"]
    spent = _decided(_reply(usage))
    assert spent["tokens"] > 0
    assert spent["estimated_tokens"] == spent["tokens"]


@pytest.mark.parametrize(
    "field", ["input_tokens", "output_tokens", "cache_read"], ids=lambda f: f"negative {f}"
)
def test_a_bad_input_or_output_count_never_lowers_counts_or_cost(field: str) -> None:
    usage: dict[str, Any] = {**GOOD, "input_token_details": {"cache_read": 2}}
    if field == "cache_read":
        usage["input_token_details"] = {"cache_read": -(10**9)}
    else:
        usage[field] = -(10**9)
    spent = _decided(_reply(usage))
    assert (spent["input_tokens"], spent["output_tokens"], spent["cached_tokens"]) == (0, 0, 0)
    assert spent["cost"] is None
    assert "reported no usable token counts" in spent["unpriced"]
    assert spent["tokens"] >= 10  # never below the total the reply reported


def test_a_total_that_is_a_count_is_taken_beside_a_bad_part() -> None:
    usage: dict[str, Any] = {**GOOD, "input_tokens": -(10**9)}
    spent = _decided(_reply(usage))
    assert spent["tokens"] == 10  # the total itself was a count


def test_a_total_below_its_parts_counts_the_parts_and_cached_cannot_exceed_input() -> None:
    usage = {
        "input_tokens": 500,
        "output_tokens": 20,
        "total_tokens": 1,
        "input_token_details": {"cache_read": 9000},
    }
    spent = _decided(_reply(usage))
    assert (spent["tokens"], spent["estimated_tokens"]) == (520, 0)
    assert spent["cached_tokens"] == 500


def test_an_honest_report_is_used_as_it_is() -> None:
    spent = _decided(_reply(GOOD))
    assert (spent["tokens"], spent["estimated_tokens"], spent["input_tokens"]) == (10, 0, 7)


def _graph(replies: Any, checkpointer: Any = None, **budget: Any) -> Any:
    policy = Policy(
        budget=Budget(max_steps=100, max_tool_calls=100, **budget), loop_detection="off"
    )
    model = GenericFakeChatModel(messages=replies)
    return build_graph(model, SUPPORT_TOOLS, policy=policy, checkpointer=checkpointer)


def test_negative_totals_no_longer_run_past_max_tokens() -> None:
    """The issue's run: -10**9 per reply under max_tokens=300 made 25 calls and ended success
    with tokens = -999998010."""
    lying = {"input_tokens": 5, "output_tokens": 5, "total_tokens": -(10**9)}
    replies = itertools.cycle([_reply(lying)])
    graph = _graph(replies, max_tokens=300)
    out = result_of(graph, graph.invoke({"goal": "refund?"}))
    assert out["stop_reason"] == "max_tokens"
    assert out["usage"]["tokens"] >= 300
    assert len(out["history"]) < 25


@pytest.mark.parametrize("max_tokens", [300, None])
def test_an_absurd_total_ends_with_a_stop_reason_not_an_exception(
    tmp_path: Path, max_tokens: int | None
) -> None:
    """10**30 made the serializer raise ``Integer exceeds 64-bit range`` from invoke. Each
    reply's count is capped in its record: what the run spent is their sum."""
    huge = {"input_tokens": 10**30, "output_tokens": 10**30, "total_tokens": 10**30}
    replies = iter([_reply(huge), _reply(huge), _reply(huge, tool=False)])
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        graph = _graph(replies, saver, max_tokens=max_tokens)
        out = graph.invoke({"goal": "refund?"}, {"configurable": {"thread_id": "t"}})
        stored = read(graph, "t")["usage"]
    assert out["stop_reason"] == ("max_tokens" if max_tokens else "success")
    replies = stored["steps"]
    assert replies == (1 if max_tokens else 3)
    assert stored["tokens"] == stored["input_tokens"] == replies * TOKEN_CAP


def _priced(message: AIMessage, model: str) -> dict[str, Any]:
    """decide's usage after ``message``, priced as ``model`` by genai-prices' table."""
    parts = deps([lambda _: message])
    object.__setattr__(parts, "bound", GenericFakeChatModel(messages=iter([message])))
    object.__setattr__(parts, "pricer", Pricer(model=model, price=None))
    config = saved()
    decide(state(), config, deps=parts)
    return usage(config).model_dump(mode="json")


def test_a_reply_reporting_zero_tokens_is_unusable_for_max_tokens_and_max_cost_alike() -> None:
    """Issue 28: 0 input and 0 output tokens were estimated for ``max_tokens`` but priced at
    0 USD, so ``max_cost`` never bound."""
    spent = _priced(_reply({"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}), "gpt-4o")
    assert spent["tokens"] > 0
    assert spent["estimated_tokens"] == spent["tokens"]
    assert spent["cost"] is None
    assert "reported no usable token counts" in spent["unpriced"]


def test_cache_writes_are_priced_as_genai_prices_prices_them() -> None:
    """Issue 28: 1M input tokens of claude-opus-4-1, all of them cache writes, cost 18.75 USD
    in genai-prices' table; dropping the cache writes priced them at 15.00."""
    usage = {
        "input_tokens": 1_000_000,
        "output_tokens": 0,
        "total_tokens": 1_000_000,
        "input_token_details": {"cache_creation": 1_000_000},
    }
    assert _priced(_reply(usage), "claude-opus-4-1")["cost"] == pytest.approx(18.75)


def test_audio_and_reasoning_tokens_reach_the_table() -> None:
    """Every token class the reply reports is passed on: audio is priced apart on
    gemini-3.1-flash-live-preview (3 USD per million audio input tokens against 0.75 for
    text; 12 per million audio output tokens against 4.50), reasoning is output."""
    model = "gemini-3.1-flash-live-preview"
    heard = {
        "input_tokens": 1_000_000,
        "output_tokens": 1_000_000,
        "total_tokens": 2_000_000,
        "input_token_details": {"audio": 1_000_000},
        "output_token_details": {"audio": 1_000_000},
    }
    assert _priced(_reply(heard), model)["cost"] == pytest.approx(15.0)
    reasoning = {**GOOD, "output_token_details": {"reasoning": 3}}
    assert _priced(_reply(reasoning), "o3")["cost"] == _priced(_reply(GOOD), "o3")["cost"]
