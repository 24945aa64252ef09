"""What a run ran under, recorded once in its state at its first decision (``RunContext``): the
model, where it was served from, the protocol, the policy in force with a short hash to compare
runs by, and the package version. Built once per graph: it is the same for every run of it."""

from __future__ import annotations

import math
from typing import Any

from gated_react._engine.execution.call_keys import short_hash
from gated_react._engine.model.pricing import Pricer
from gated_react.policy import Policy
from gated_react.redact import redact_url, secrets_of
from gated_react.release import package_version
from gated_react.state import RunContext
from gated_react.state.calls import canonical_json

_URL_FIELDS = ("openai_api_base", "base_url", "api_base", "endpoint_url")


def run_context(model: Any, policy: Policy, pricer: Pricer) -> RunContext:
    """The context a graph's runs record; the base URL masked (its userinfo, the model's own
    keys, anything shaped like a key or password)."""
    fields = policy_fields(policy)
    kind = type(model)
    return RunContext(
        model_class=f"{kind.__module__}.{kind.__qualname__}",
        model=pricer.model,
        base_url=_base_url(model),
        protocol=policy.protocol,
        policy=fields,
        policy_hash=short_hash(canonical_json(fields)),
        priced_by=pricer.source,
        version=package_version(),
    )


def policy_fields(policy: Policy) -> dict[str, Any]:
    """The policy as plain JSON, sets sorted, so equal policies give equal hashes; an answer
    schema is named by its class."""
    fields: dict[str, Any] = _spelled(policy.model_dump(mode="json", exclude={"answer_schema"}))
    for path, default in _ADDED.items():
        *outer, name = path
        held = fields
        for part in outer:
            held = held[part]
        if held.get(name) == default:
            del held[name]
    for name in ("allow", "require_approval"):
        if fields[name] is not None:
            fields[name] = sorted(fields[name])
    schema = policy.answer_schema
    fields["answer_schema"] = (
        None if schema is None else f"{schema.__module__}.{schema.__qualname__}"
    )
    return fields


_ADDED: dict[tuple[str, ...], Any] = {
    ("on_tool_limit",): "stop",
    ("budget", "thread_max_steps"): None,
    ("budget", "thread_max_tool_calls"): None,
    ("budget", "thread_tool_limits"): {},
}
"""Fields added to ``Policy`` after runs were recorded, left out at their default: a policy
that does not use one keeps the hash its runs' permits were written under, so a thread paused
by the release before is resumed without asking again."""


def _spelled(value: Any) -> Any:
    """``value`` with a limit of ``float("inf")`` (no limit) as the text ``"inf"``: JSON holds
    no infinity, so a store's serializer kept ``null``, which no ``Budget`` reads back (``show``
    took the run for damaged); ``Policy`` and ``Budget`` read the text as the number."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _spelled(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_spelled(item) for item in value]
    return value


def _base_url(model: Any) -> str | None:
    for name in _URL_FIELDS:
        value = getattr(model, name, None)
        if isinstance(value, str) and value:
            return redact_url(value, *secrets_of(model))
    return None
