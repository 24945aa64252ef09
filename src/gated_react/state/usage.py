"""What a run has spent of its budgets, and the budgets a human extended."""

import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from gated_react.state.base import StrictModel

SECONDS_CAP = 1e15
"""The most active seconds ``Usage.seconds`` holds: what a non-finite figure reads as, past any
``max_seconds``."""


def _amount(value: float) -> bool:
    return math.isfinite(value) and value >= 0


class Usage(StrictModel):
    """Budget consumption. The call counts could be recounted from the history, but the gate
    checks them before every call: kept here they cost the same at step 1 and at step 1,000."""

    steps: int = 0
    """Model decisions requested so far."""
    tool_calls: int = 0
    """Tool calls let through or shown to the model as refused (both count)."""
    per_tool: dict[str, int] = Field(default_factory=dict)
    """The same, per tool name."""
    tokens: int = 0
    """Model tokens spent (reported by the model, else estimated); ``max_tokens`` counts these.
    A reported count is used only if it is a non-negative integer (capped at 10**15)."""
    estimated_tokens: int = 0
    """Of ``tokens``, those estimated because a reply reported no usable total (none, zero,
    negative or not an integer): how much of ``tokens`` is a guess."""
    cached_tokens: int = 0
    """Of the input tokens, those the provider reported as read from its prompt cache
    (``input_token_details.cache_read``): billed at a fraction of the price; counted in
    ``tokens`` too."""
    input_tokens: int = 0
    """Input (prompt) tokens the provider reported, the cached ones included."""
    output_tokens: int = 0
    """Output (completion) tokens the provider reported, reasoning tokens included."""
    cost: float | None = 0.0
    """US dollars the model calls cost (input, cached input and output tokens at the model's
    prices); None when any call could not be priced (``unpriced`` says why): never a guess."""
    unpriced: str | None = None
    """Why ``cost`` is None: the model is in no price table, or a reply reported no tokens."""
    seconds: float = 0.0
    """Active seconds spent in model and tool calls; paused or crashed time is not counted.
    Finite: a stored NaN or infinity reads as ``SECONDS_CAP`` (spent past every limit), a
    negative figure as 0."""

    @model_validator(mode="before")
    @classmethod
    def _finite_cost(cls, data: Any) -> Any:
        """A cost that is no amount of dollars (NaN, infinite, negative: an edit, never a
        price) reads as unknown, which no ``max_cost`` lets pass: NaN compares false, and a
        budget compared against it would never bind."""
        cost = data.get("cost") if isinstance(data, dict) else None
        if isinstance(cost, int | float) and not isinstance(cost, bool) and not _amount(cost):
            why = f"usage.cost was {cost}, not an amount of US dollars: what was spent is unknown"
            return {**data, "cost": None, "unpriced": why}
        return data

    @field_validator("seconds")
    @classmethod
    def _finite_seconds(cls, seconds: float) -> float:
        if not math.isfinite(seconds):
            return SECONDS_CAP
        return max(seconds, 0.0)


class Extension(StrictModel):
    """A spent budget a human extended (``Policy.on_budget="ask"``); it counts from then on."""

    budget: str
    """The budget: ``max_steps``, ``max_tool_calls``, ``tool_limit:<tool>``, ``max_seconds``,
    ``max_tokens`` or ``max_cost``."""
    limit: float
    """The new limit."""
    was: float
    """The limit before."""
    spent: float
    """What the run had spent of it when the human was asked."""
    decision: Literal["approve", "edit"]
    """``approve`` took the proposed extension, ``edit`` set this limit."""
    step: int
    """The step at which it was granted."""
