"""Cost in dollars: genai-prices' packaged table against figures computed by hand, the
policy's own prices, unpriced models, and no network at any point."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from gated_react import Policy, Price, UnpricedModel, build_graph
from gated_react._engine.model.pricing import Pricer, Tokens, add_cost, model_name, pricer_for
from gated_react.testing import ScriptedChatModel

# gpt-4.1-mini by hand (OpenAI's list price): 0.40 USD per million input tokens, 0.10 per
# million cached input tokens, 1.60 per million output tokens.
BY_HAND = (2_000 * 0.40 + 8_000 * 0.10 + 500 * 1.60) / 1_000_000  # 0.0024


class Named:
    def __init__(self, name: str) -> None:
        self.model_name = name


def test_genai_prices_matches_the_hand_computed_figure_with_cached_tokens() -> None:
    pricer = pricer_for(Named("gpt-4.1-mini"), {})
    assert pricer.source is not None
    assert pricer.source.startswith("genai-prices 0.2")
    assert pricer.cost(Tokens(input=10_000, cached=8_000, output=500)) == pytest.approx(BY_HAND)
    assert pytest.approx(0.0024) == BY_HAND
    # Without the cache every input token is at the input price: twice the figure.
    assert pricer.cost(Tokens(input=10_000, cached=0, output=500)) == pytest.approx(0.0048)


def test_the_table_is_read_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No socket is opened and no updater thread starts: the wheel's snapshot only."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("genai-prices tried the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    before = {thread.name for thread in threading.enumerate()}
    pricer = pricer_for(Named("claude-sonnet-4-5"), {})
    assert pricer.cost(Tokens(input=1_000, cached=0, output=1_000)) is not None
    assert {thread.name for thread in threading.enumerate()} <= before


def test_policy_prices_price_a_private_model_and_override_the_table() -> None:
    private = pricer_for(Named("my-llama"), {"my-llama": Price(input=1.0, output=2.0)})
    assert private.source == "policy"
    # No cached price: cached input is charged as input.
    assert private.cost(Tokens(input=1_000, cached=400, output=100)) == pytest.approx(0.0012)
    mine = Price(input=1.0, cached_input=0.0, output=0.0)
    override = pricer_for(Named("gpt-4.1-mini"), {"gpt-4.1-mini": mine})
    assert override.cost(Tokens(input=10_000, cached=8_000, output=500)) == pytest.approx(0.002)


def test_an_unknown_model_is_unpriced_never_guessed() -> None:
    pricer = pricer_for(Named("smollm2-135m-instruct"), {})
    assert pricer.cost(Tokens(input=10, cached=0, output=10)) is None
    assert pricer.unpriced is not None
    assert "'smollm2-135m-instruct' is unpriced" in pricer.unpriced
    assert add_cost(0.5, None) is None
    assert add_cost(None, 0.1) is None
    assert add_cost(0.0012, 0.0012) == 0.0024  # rounded, not 0.0024000000000000002


def test_model_names() -> None:
    assert model_name(ScriptedChatModel(replies=[])) == "scripted"
    assert model_name(Named("gpt-4.1")) == "gpt-4.1"
    assert isinstance(pricer_for(ScriptedChatModel(replies=[]), {}), Pricer)


def test_a_cost_budget_on_an_unpriced_model_is_refused_at_build_time() -> None:
    model = ScriptedChatModel(replies=[])
    with pytest.raises(UnpricedModel, match=r"max_cost 0.5 needs a price: model 'scripted'"):
        build_graph(model, [], policy=Policy().replace(max_cost=0.5))
    priced = Policy().replace(max_cost=0.5, prices={"scripted": Price(input=1, output=1)})
    build_graph(model, [], policy=priced)
