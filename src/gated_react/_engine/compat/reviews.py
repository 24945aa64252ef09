"""``HumanInTheLoopMiddleware``, taken as what it says: which tools a human reviews, with which
decisions, asked with which description, and when. The gate asks (``authority/admit.py``): the
middleware never runs as a hook, so no hook stands between a call and its permit.

A graph built with one rejects as ``create_agent`` does: the model reads the rejection and its
reason as the call's result, and answers the user (``Policy.on_reject="observe"``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gated_react.errors import MiddlewareFailed, MiddlewareRefused
from gated_react.policy import APPROVAL_DECISIONS, Policy

_PREFIX = "Tool execution requires approval"


@dataclass(frozen=True, slots=True)
class Review:
    """How one tool's calls are reviewed."""

    decisions: tuple[str, ...]
    description: str | Callable[..., str] | None = None
    prefix: str = _PREFIX
    when: Callable[[Any], bool] | None = None
    per_call: bool = False
    """Asked as LangChain's ``interrupt_mode="per_call"`` asks: the question carries its
    ``ToolApprovalRequest`` keys too, and takes a bare decision as its answer."""
    edit_notice: str | None = None
    """The middleware's ``edit_notice``: what the result of a call a reviewer edited opens
    with (None: nothing)."""

    def edit_prefix(self, tool: str, args: dict[str, Any], said: bool) -> str:
        """What the result of a call a reviewer edited opens with, in the middleware's words
        (``said``: the tool returned text, which follows)."""
        if not self.edit_notice:
            return ""
        shown = json.dumps(args, default=str)
        words = str(self.edit_notice).encode("utf-8", "replace").decode("utf-8")
        notice = f"{words} Executed instead: {tool} with arguments {shown}."
        return f"{notice}\n\nTool response:\n" if said else notice

    def describe(self, call: Mapping[str, Any], state: Any, runtime: Any) -> str:
        """The question's description, as the middleware would write it (one that raises is
        the middleware's failure: ``MiddlewareFailed``)."""
        if callable(self.description):
            try:
                return str(self.description(call, state, runtime))
            except Exception as exc:
                raise MiddlewareFailed.of(_NAME, "description", exc, ()) from exc
        if self.description is not None:
            return self.description
        return f"{self.prefix}\n\nTool: {call['name']}\nArgs: {call['args']}"

    def needed(self, request: Any) -> bool:
        """Whether its ``when`` asks a human about this call (one that raises is the
        middleware's failure)."""
        assert self.when is not None
        try:
            return bool(self.when(request))
        except Exception as exc:
            raise MiddlewareFailed.of(_NAME, "when", exc, ()) from exc


_NAME = "HumanInTheLoopMiddleware"


def reviews_of(stack: Sequence[Any]) -> dict[str, Review]:
    """The reviews the ``HumanInTheLoopMiddleware`` instances in ``stack`` configure."""
    found: dict[str, Review] = {}
    for m in stack:
        if type(m).__name__ != "HumanInTheLoopMiddleware":
            continue
        prefix = str(getattr(m, "description_prefix", _PREFIX))
        for tool, config in (getattr(m, "interrupt_on", None) or {}).items():
            if not config:
                continue
            given = config if isinstance(config, Mapping) else {}
            decisions = tuple(given.get("allowed_decisions") or APPROVAL_DECISIONS)
            if not {"approve", "reject"} <= set(decisions):
                why = f"{tool} must allow approve and reject (the gate always offers both)"
                raise MiddlewareRefused(f"HumanInTheLoopMiddleware is not taken: {why}")
            per_call = getattr(m, "interrupt_mode", "batched") == "per_call"
            description, when = given.get("description"), given.get("when")
            notice = getattr(m, "edit_notice", None)
            found[tool] = Review(decisions, description, prefix, when, per_call, notice)
    return found


def with_reviews(policy: Policy, reviews: Mapping[str, Review]) -> Policy:
    """The policy with the reviewed tools under approval, each with its decisions, and
    rejections shown to the model."""
    if not reviews:
        return policy
    decisions = {
        tool: r.decisions
        for tool, r in reviews.items()
        if set(r.decisions) != set(APPROVAL_DECISIONS)
    }
    return policy.replace(
        require_approval=policy.require_approval | set(reviews),
        approval_decisions={**policy.approval_decisions, **decisions},
        on_reject="observe",
    )
