"""The keys a call is known by, all from the canonical JSON of its arguments: the trace's
argument hash, the loop key the gate compares, and the idempotency key a tool may receive.

Each call the gate lets through leaves a loop key in ``State.seen``: the tool, the hash of its
exact arguments and the hash of their normalized form. ``LoopIndex`` checks a call against a
run's keys with no Python work per earlier key, and nothing is re-serialized.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections import Counter
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from gated_react.policy import LoopMode
from gated_react.state.calls import canonical_json

_SPACES = re.compile(r"\s+")
# Plain decimal numbers only: no "nan", "inf", "0x10" or digit-group underscores.
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def short_hash(text: str, length: int = 12) -> str:
    """A short hex digest, stable across processes and machines."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def args_hash(args: dict[str, Any] | None) -> str:
    """The trace's hash of a call's arguments; key order never matters."""
    return short_hash(canonical_json(args or {}))


def call_key(
    where: str,
    tool: str,
    args: dict[str, Any],
    occurrence: int,
    *,
    normalized: bool = False,
    text: str | None = None,
) -> str:
    """A call's key: its thread and run (``where``), tool and arguments (compared as loop
    detection compares them), and how many times the run asked for the same before on its
    branch. The same wherever the call is replayed, forked or answered twice; another run, or
    the same call asked for again on purpose, has another. Tools that take an
    ``idempotency_key`` are given it. ``text``: ``args``' canonical JSON, when the caller has
    it already."""
    if normalized:
        form = canonical_json(normalize(args))
    else:
        form = canonical_json(args) if text is None else text
    return short_hash(f"{where}\n{tool}\n{form}\n{occurrence}", 24)


def normalize(value: Any) -> Any:
    """Strings trimmed, inner whitespace collapsed and case-folded, at every depth; numbers and
    strings that spell a finite decimal number become one canonical number string, so ``42``,
    ``42.0``, ``"42"`` and ``" 4.2e1 "`` are the same argument. Booleans stay booleans."""
    number = _number(value)
    if number is not None:
        return number
    if isinstance(value, str):
        return _SPACES.sub(" ", value.strip()).casefold()
    if isinstance(value, dict):
        return {str(k): normalize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    return value


def _number(value: Any) -> str | None:
    """The canonical decimal form of a number or a number-like string, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    text = value.strip() if isinstance(value, str) else str(value)
    if isinstance(value, str) and not _NUMBER.fullmatch(text):
        return None
    number = Decimal(text)  # never raises here: the pattern or str() of an int or float
    return _canonical(number) if number.is_finite() else None  # a float's nan or inf


def _canonical(number: Decimal) -> str:
    """Plain digits without trailing zeros (scientific beyond a thousand digits)."""
    if number.is_zero():
        return "0"
    if abs(number.adjusted()) >= 1000:
        return f"{number.normalize():E}"
    if number == number.to_integral_value():
        return f"{number:f}".split(".")[0]
    return f"{number.normalize():f}"


def loop_key(tool: str, args: dict[str, Any], text: str | None = None) -> str:
    """``<tool>:<exact args hash>:<normalized args hash>``; the tool's name may hold colons,
    the hashes never do.

    The gate asks twice for each call, one right after the other (is it a repeat; then,
    counted, its key), so the last keys are kept by the tool and the arguments' canonical JSON,
    which fixes both hashes for the JSON a state holds: normalizing and two digests are most of
    the cost of small arguments. Large ones are not kept (a file's contents, say): they would
    hold memory, and serializing them is most of their cost anyway. ``text``: ``args``'
    canonical JSON, when the caller has it already."""
    exact = canonical_json(args or {}) if text is None else text
    found = _KEYS.get((tool, exact))
    if found is None:
        found = f"{tool}:{short_hash(exact)}:{args_hash(normalize(args))}"
        if len(exact) <= _KEPT_CHARS:
            if len(_KEYS) >= _KEYS_KEPT:
                _KEYS.clear()
            _KEYS[tool, exact] = found
    return found


_KEYS: dict[tuple[str, str], str] = {}
_KEYS_KEPT = 64
_KEPT_CHARS = 2048


_HASH = 12
"""The length of ``args_hash``: a loop key ends with ``:<exact>:<normalized>``."""
_TOOL = operator.itemgetter(slice(None, -2 * _HASH - 2))  # "tool"
_TOOL_COLON = operator.itemgetter(slice(None, -2 * _HASH - 1))  # "tool:"
_NORMALIZED = operator.itemgetter(slice(-_HASH, None))  # "<normalized>"


def tool_of(key: str) -> str:
    """The tool a loop key belongs to (tool names may hold colons; the two hashes never do)."""
    return key.rsplit(":", 2)[0]


def tool_counts(keys: Iterable[str]) -> Counter[str]:
    """How many keys each tool has (every key's tool, as ``tool_of`` reads it)."""
    return Counter(map(_TOOL, keys))


class LoopIndex:
    """A run's loop keys, kept for checks that cost no Python work per earlier call.

    In ``exact`` mode a repeat has the whole key of the call: the exact hash fixes the
    arguments, and so their normalized hash; the keys are counted once (``exact``: the count
    a run's reading keeps as it reads on, shared, never changed here). ``normalized`` mode
    counts the keys by tool and normalized hash once, on its first check, then looks calls
    up. Keys added (the calls a gate's pass admits) are this index's own."""

    __slots__ = ("_added", "_exact", "_keys", "_normalized")

    def __init__(self, keys: Iterable[str] = (), exact: Counter[str] | None = None) -> None:
        if exact is None:
            keys = list(keys)
            exact = Counter(keys)
        self._keys: Iterable[str] = keys
        self._exact = exact
        self._added: list[str] = []
        self._normalized: Counter[str] | None = None

    def add(self, key: str) -> None:
        self._added.append(key)
        if self._normalized is not None:
            self._normalized[_TOOL_COLON(key) + _NORMALIZED(key)] += 1

    def repeats(
        self, tool: str, args: dict[str, Any], mode: LoopMode, text: str | None = None
    ) -> int:
        """How many times ``tool(args)`` was already let through (0 with mode ``off``);
        ``text``: ``args``' canonical JSON, when the caller has it already."""
        if mode == "off":
            return 0
        if mode == "exact":
            key = loop_key(tool, args, text)
            return self._exact.get(key, 0) + self._added.count(key)
        if self._normalized is None:
            keys = [*self._keys, *self._added]
            self._normalized = Counter(
                map(operator.add, map(_TOOL_COLON, keys), map(_NORMALIZED, keys))
            )
        return self._normalized.get(f"{tool}:{args_hash(normalize(args))}", 0)


def is_repeat(
    seen: Iterable[str] | LoopIndex, tool: str, args: dict[str, Any], mode: LoopMode
) -> bool:
    """True when ``tool(args)`` already ran in this run (never, with mode ``off``)."""
    return repeats(seen, tool, args, mode) > 0


def repeats(
    seen: Iterable[str] | LoopIndex, tool: str, args: dict[str, Any], mode: LoopMode
) -> int:
    """How many times ``tool(args)`` was already let through in this run (0 with mode ``off``)."""
    index = seen if isinstance(seen, LoopIndex) else LoopIndex(seen)
    return index.repeats(tool, args, mode)
