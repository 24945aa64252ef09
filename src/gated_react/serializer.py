"""The one serializer every checkpointer of this package uses: it revives only the types a
run's state holds, so a store someone else can write cannot make a reader run code.

LangGraph's ``JsonPlusSerializer`` revives a msgpack extension value by importing the module it
names and calling the name with the stored arguments; by default it does so for any name (with a
warning). A row edited to hold ``Ext(0, packb(["os", "system", "..."]))`` ran that command in the
process that read the thread. Here every extension value is checked against an allowlist before
LangGraph sees it, nested values included, and anything else stops the read with
``UnsafeCheckpoint``: nothing is imported or called, and the refusal is one line.

Allowed: what LangGraph itself stores and marks safe (LangChain messages, ``Interrupt``,
``Command``, ``Send``, datetimes, UUIDs, ...), this package's state models, and the types a
user names with ``allow`` (``open_checkpointer(url, allow=[MyType])``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_METHODS, SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from gated_react.errors import GatedReactError, printable

AllowedType = type | tuple[str, str]
"""A type a store may revive: the class itself, or ``(module, name)`` as the store names it."""

# Extension codes of langgraph.checkpoint.serde.jsonplus: 0-2 call a constructor, 3 a method,
# 4-5 build a pydantic model; 7 wraps a DeltaChannel snapshot (a container, checked inside).
_NAMED = frozenset({0, 1, 2, 3, 4, 5})
_METHOD = 3
_CONTAINER = 7
_STATE = "gated_react.state"
_PAYLOADS = ("null", "bytes", "bytearray", "msgpack")
_HOW_TO_ALLOW = "a type of your own must be allowed: open_checkpointer(url, allow=[YourType])"


@cache
def _state_types() -> frozenset[tuple[str, str]]:
    """This package's state models, which LangGraph stores as they were passed in (an input
    given as ``RunInput(...)``): constructing one only validates its fields. Looked up only when
    a stored value names one: importing the state pulls in LangGraph's graph modules, which the
    CLI's listing commands never need."""
    from gated_react import state

    return frozenset(
        (value.__module__, value.__name__)
        for value in vars(state).values()
        if isinstance(value, type)
        and issubclass(value, BaseModel)
        and value.__module__ == state.__name__
    )


def _key(allowed: AllowedType) -> tuple[str, str]:
    if isinstance(allowed, type):  # named as LangGraph's encoder names it
        return (allowed.__module__, allowed.__name__)
    module, name = allowed
    return (str(module), str(name))


class UnsafeCheckpoint(GatedReactError):
    """A stored checkpoint holds a value gated-react will not revive (reviving it would import
    and call what the store names); nothing was imported or called. The message is one line."""


class _Guard:
    """The extension hook of one load: checks every extension value, nested ones included,
    before LangGraph revives it, and keeps the first refusal (ormsgpack replaces an exception
    raised in a hook with its own "ext_hook failed")."""

    def __init__(
        self, allowed: Callable[[tuple[str, str]], bool], revive: Any, revive_state: Any
    ) -> None:
        self.allowed = allowed
        self.revive = revive
        self.revive_state = revive_state
        self.refused: str | None = None

    def __call__(self, code: int, data: bytes) -> Any:
        name = self.scan(code, data)
        if name is not None and name[0] == _STATE:
            return self.revive_state()(code, data)
        return self.revive(code, data)

    def scan(self, code: int, data: bytes) -> tuple[str, str] | None:
        if code not in _NAMED and code != _CONTAINER:
            self.refuse(f"an extension value of type {code}")
        found = ormsgpack.unpackb(data, ext_hook=self.scan, option=ormsgpack.OPT_NON_STR_KEYS)
        if code == _CONTAINER:
            return None
        if (
            not isinstance(found, list)
            or len(found) < 3
            or not all(isinstance(part, str) for part in found[:2])
        ):
            self.refuse("a malformed extension value")
        name = (found[0], found[1])
        if code == _METHOD:
            method = found[3] if len(found) > 3 else None
            if (*name, method) not in SAFE_MSGPACK_METHODS:
                self.refuse(f"a call of {'.'.join(name)}.{method}")
        elif not self.allowed(name):
            self.refuse(f"a value of type {'.'.join(name)}")
        return name

    def refuse(self, what: str) -> None:
        self.refused = self.refused or printable(what[:200])
        raise ValueError(self.refused)


class GuardedSerializer(JsonPlusSerializer):
    """``JsonPlusSerializer`` that refuses, instead of reviving, any type not allowed; the
    payload kinds it never writes (pickle, legacy JSON constructors) are refused too."""

    def __init__(self, allow: Iterable[AllowedType] = ()) -> None:
        extra = frozenset(_key(item) for item in allow)
        self.named: frozenset[tuple[str, str]] = (
            frozenset(key for key in SAFE_MSGPACK_TYPES if len(key) == 2) | extra
        )
        # Every value reaches LangGraph's reviver only after ``_Guard`` checked it and all it
        # holds, so LangGraph itself is told to revive what it is handed.
        super().__init__(allowed_msgpack_modules=True)
        self._state_hook: Any = None

    def allowed(self, name: tuple[str, str]) -> bool:
        """Whether a stored value of the type ``name`` (module, class) may be revived."""
        return name in self.named or (name[0] == _STATE and name in _state_types())

    def _state_reviver(self) -> Any:
        """LangGraph's reviver told this package's state types by name, so reviving one (an
        input stored as ``RunInput``, read back with the messages' delta history) raises no
        "unregistered type" warning; built on first use (importing the state is slow)."""
        if self._state_hook is None:
            named = tuple(self.named | _state_types())
            self._state_hook = JsonPlusSerializer(allowed_msgpack_modules=named)._unpack_ext_hook
        return self._state_hook

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        if kind not in _PAYLOADS:
            raise UnsafeCheckpoint(
                f"a stored checkpoint holds a {printable(str(kind)[:40])!r} value, which "
                "gated-react never writes and does not load"
            )
        if kind != "msgpack":
            return super().loads_typed(data)
        guard = _Guard(self.allowed, self._unpack_ext_hook, self._state_reviver)
        try:
            return ormsgpack.unpackb(payload, ext_hook=guard, option=ormsgpack.OPT_NON_STR_KEYS)
        except ValueError:
            if guard.refused is None:
                raise
        raise UnsafeCheckpoint(
            f"a stored checkpoint holds {guard.refused}, which gated-react does not revive "
            "(nothing was imported or run); the store was written by other code, or "
            + _HOW_TO_ALLOW
        )


def serializer(allow: Iterable[AllowedType] = ()) -> GuardedSerializer:
    """The serializer for a checkpointer: pass it as ``serde=`` to a saver you build yourself.
    ``allow`` names the types of your own that your state stores (classes or ``(module, name)``)."""
    return GuardedSerializer(allow)
