"""What a model call cost in US dollars: the policy's own price for the model, else the price
table ``genai-prices`` ships in its wheel.

Only the packaged snapshot is read: nothing here fetches newer prices (``genai_prices``'
``UpdatePrices`` would go online; it is never started), so a cost is the same offline and
online, and the same on every run of one installed version. A model neither knows is unpriced:
its cost is None, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from typing import Any

from gated_react.policy import Price

MILLION = 1_000_000


@dataclass(frozen=True, slots=True)
class Tokens:
    """One reply's token counts as the provider reported them, by class: ``cached`` (cache
    reads), ``cache_write`` and ``input_audio`` are parts of ``input``; ``output_audio`` and
    ``reasoning`` parts of ``output`` (LangChain's ``input_token_details`` and
    ``output_token_details``)."""

    input: int
    cached: int
    output: int
    cache_write: int = 0
    input_audio: int = 0
    output_audio: int = 0
    reasoning: int = 0

    def classes(self) -> dict[str, int]:
        """genai-prices' usage keys, each priced at its own rate where the table has one."""
        found = {
            "input_tokens": self.input,
            "cache_read_tokens": self.cached,
            "cache_write_tokens": self.cache_write,
            "input_audio_tokens": self.input_audio,
            "output_tokens": self.output,
            "output_audio_tokens": self.output_audio,
            "output_reasoning_tokens": self.reasoning,
        }
        return {key: count for key, count in found.items() if count}


@dataclass(frozen=True, slots=True)
class Pricer:
    """How one graph's model is priced, decided once when the graph is built."""

    model: str
    """The model's name, as priced (``model_name(...)``)."""
    price: Price | None
    """The policy's price for it, if any (it wins over the table)."""

    @property
    def in_table(self) -> bool:
        """Whether ``genai-prices``' packaged table knows the model: looked up once per name
        and process, so a worker building a graph per job pays for it once."""
        return self.price is None and in_table(self.model)

    @property
    def source(self) -> str | None:
        """Where the price comes from: ``policy``, ``genai-prices <version>``, or None."""
        if self.price is not None:
            return "policy"
        return f"genai-prices {table_version()}" if self.in_table else None

    @property
    def unpriced(self) -> str | None:
        """Why this model's calls have no cost, or None when they have one."""
        if self.source is not None:
            return None
        return (
            f"model {self.model!r} is unpriced: genai-prices {table_version()} does "
            "not know it and Policy.prices has no entry for it"
        )

    def cost(self, tokens: Tokens) -> float | None:
        """The reply's cost in USD, every token class the reply reports at its own price in
        the table (cache reads and writes, audio, reasoning); None if unpriced."""
        if self.price is not None:
            return policy_cost(self.price, tokens)
        if not self.in_table:
            return None
        from genai_prices import Usage, calc_price

        usage = Usage(**tokens.classes())
        return float(calc_price(usage, model_ref=self.model).total_price)


def policy_cost(price: Price, tokens: Tokens) -> float:
    """A ``Price`` applied to one reply's tokens: cache writes and audio at the input price,
    audio and reasoning output at the output price (a ``Price`` has no separate rate)."""
    cached = price.input if price.cached_input is None else price.cached_input
    fresh = max(tokens.input - tokens.cached, 0)
    return (fresh * price.input + tokens.cached * cached + tokens.output * price.output) / MILLION


def model_name(model: Any) -> str:
    """The name a chat model goes by: ``model_name`` (ChatOpenAI), ``model`` (most others),
    ``model_id``, else its LangChain type (``scripted`` for ``ScriptedChatModel``)."""
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return str(getattr(model, "_llm_type", type(model).__name__))


def pricer_for(model: Any, prices: dict[str, Price]) -> Pricer:
    """The pricer of ``model``, decided when the graph is built."""
    name = model_name(model)
    price = prices.get(name)
    return Pricer(model=name, price=price)


@cache
def table_version() -> str:
    """The installed ``genai-prices``' version, read once per process: reading a package's
    metadata takes milliseconds (2.4 ms here), and a run's first reply names it."""
    return version("genai-prices")


@cache
def in_table(name: str) -> bool:
    """Whether the packaged table prices ``name`` (once per name and process)."""
    from genai_prices import Usage, calc_price  # its table loads on first use (about 0.2 s)

    try:
        calc_price(Usage(), model_ref=name)
    except LookupError:
        return False
    return True


def add_cost(spent: float | None, cost: float | None) -> float | None:
    """A running total: unknown once any part is unknown; rounded so sums of prices print as
    the prices do (0.0024, not 0.0024000000000000002)."""
    if spent is None or cost is None:
        return None
    return round(spent + cost, 12)
