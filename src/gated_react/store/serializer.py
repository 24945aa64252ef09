"""The one serializer every checkpointer of this package uses: it revives only the types a
run's state holds, so a store someone else can write cannot make a reader run code.

LangGraph's ``JsonPlusSerializer`` revives a msgpack extension value by importing the module it
names and calling the name with the stored arguments; by default it does so for any name (with a
warning). A row edited to hold ``Ext(0, packb(["os", "system", "..."]))`` ran that command in the
process that read the thread. Here msgpack is read by this module alone: every extension value
is checked against an allowlist before anything is imported, nested values included, and anything
else stops the read with ``UnsafeCheckpoint``: nothing is imported or called, and the refusal is
one line. An allowed value is built by its own type, a state model by validating it: one that does
not validate is refused, never built unchecked. Reading costs time and memory linear in the row:
each level's bytes are unpacked once, and values nested deeper than ``MAX_DEPTH`` are refused.

Allowed: what LangGraph itself stores and marks safe (LangChain messages, ``Interrupt``,
``Command``, ``Send``, datetimes, UUIDs, ...), this package's state models, and the types a
user names with ``allow`` (``open_checkpointer(url, allow=[MyType])``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any, Literal, NoReturn

import ormsgpack
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_METHODS, SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from pydantic import BaseModel

from gated_react.errors import GatedReactError, printable
from gated_react.store.key import is_sealed

AllowedType = type | tuple[str, str]
"""A type a store may revive: the class itself, or ``(module, name)`` as the store names it."""

# Extension codes of langgraph.checkpoint.serde.jsonplus: 0-2 call a constructor, 3 a method,
# 4-5 build a pydantic model; 7 wraps a DeltaChannel snapshot (a container, checked inside).
_NAMED = frozenset({0, 1, 2, 3, 4, 5})
_METHOD = 3
_CONTAINER = 7
_STATE = "gated_react.state"
_PAYLOADS = ("null", "bytes", "bytearray", "msgpack")
_ONE, _POSITIONAL = 0, 1
_SEND = ("langgraph.types", "Send")
_NOT_REVIVED = (
    ", which gated-react does not revive (nothing was imported or run); the store was written "
    "by other code, or a type of your own must be allowed: open_checkpointer(url, allow=[YourType])"
)
MAX_DEPTH = 16
"""Stored types nested in one another deeper than this are refused: a run's state nests them
three deep at most (a ``Send`` holding a state holding messages), and each level costs a copy of
what it holds."""


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


Signature = Literal["unsigned", "unverified", "keyed"]
"""Why a row's signature refused it: written without a key (``unsigned``), signed but verified
by no key given (``unverified``: edited, forged, or another key's), signed and read without a
key (``keyed``)."""


class SignatureRefused(UnsafeCheckpoint):
    """A row refused for its signature (``kind``): listings show such a thread as such."""

    def __init__(self, message: str, kind: Signature) -> None:
        super().__init__(message)
        self.kind: Signature = kind


KEY_NEEDED = (
    "it is signed with a store key, and no key was given: set GATED_REACT_STORE_KEY "
    "(open_checkpointer(url, key=...) in the API) to read it"
)


class _Held:
    """An extension value met inside another: its bytes, unpacked only once its holder is."""

    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code, self.data = code, data


class _Inner(list[_Held]):
    """ormsgpack's hook while one level is unpacked: the extension values it holds, held."""

    def __call__(self, code: int, data: bytes) -> _Held:
        held = _Held(code, data)
        self.append(held)
        return held


class _Read:
    """One load. Each extension value is checked before anything is imported or built, and each
    level's bytes are unpacked once: ormsgpack hands a nested value over as a copy of its bytes,
    so reading it while its holder is still being read (LangGraph's way) kept a copy of every
    level alive and unpacked the deepest bytes once per level above them. Here a nested value
    waits, as bytes, until its holder is unpacked, and the holder's bytes go before it is read.
    Keeps the first refusal (ormsgpack replaces an exception raised in a hook with its own)."""

    def __init__(self, allowed: Callable[[tuple[str, str]], bool]) -> None:
        self.allowed = allowed
        self.refused: str | None = None

    def __call__(self, code: int, data: bytes) -> Any:
        return self.value(_Held(code, data), 1)

    def value(self, held: _Held, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self.refuse(f"values nested deeper than {MAX_DEPTH} levels")
        if held.code not in _NAMED and held.code != _CONTAINER:
            self.refuse(f"an extension value of type {held.code}")
        data, held.data = held.data, b""
        inner = _Inner()
        try:
            found = ormsgpack.unpackb(data, ext_hook=inner, option=ormsgpack.OPT_NON_STR_KEYS)
        except ormsgpack.MsgpackDecodeError:
            self.refuse("a malformed extension value")
        del data
        if held.code == _CONTAINER:
            return _DeltaSnapshot(self.resolve(found, len(inner), depth))
        name = self.check(held.code, found)
        return self.build(held.code, name, self.resolve(found[2], len(inner), depth), found)

    def check(self, code: int, found: Any) -> tuple[str, str]:
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

    def resolve(self, root: Any, held: int, depth: int) -> Any:
        """``root`` with its ``held`` nested values read, in place (the walk stops when the
        last is found)."""
        if isinstance(root, _Held):
            return self.value(root, depth + 1)
        stack, left = ([root] if held else []), held
        while stack and left:
            node = stack.pop()
            if isinstance(node, dict) and any(isinstance(key, _Held) for key in node):
                self.refuse("a stored type as a dict key")  # LangGraph never writes one
            for key, item in node.items() if isinstance(node, dict) else enumerate(node):
                if isinstance(item, _Held):
                    node[key], left = self.value(item, depth + 1), left - 1
                elif isinstance(item, dict | list):
                    stack.append(item)
        return root

    def build(self, code: int, name: tuple[str, str], args: Any, found: list[Any]) -> Any:
        """The value, built by its own type: a state model is validated, never constructed
        unchecked (LangGraph falls back to ``model_construct``); one that fails is refused."""
        try:
            kind = getattr(importlib.import_module(name[0]), name[1])
            if code == _METHOD:
                return getattr(kind, found[3])(args)
            if code == _ONE:
                return kind(args)
            if code == _POSITIONAL:
                if name == _SEND and len(args) == 3:  # LangGraph stores the timeout third
                    return kind(args[0], args[1], timeout=args[2])
                return kind(*args)
            return kind(**args)  # keywords; pydantic validates them
        except Exception as exc:
            self.refused = printable(
                f"a value of type {'.'.join(name)} that its type does not accept "
                f"({type(exc).__name__}); the store was written by other code"
            )
            raise ValueError(self.refused) from None

    def refuse(self, what: str) -> NoReturn:
        self.refused = self.refused or printable(what[:200]) + _NOT_REVIVED
        raise ValueError(self.refused)


class GuardedSerializer(JsonPlusSerializer):
    """``JsonPlusSerializer`` that refuses, instead of reviving, any type not allowed; the
    payload kinds it never writes (pickle, legacy JSON constructors) are refused too."""

    def __init__(self, allow: Iterable[AllowedType] = (), *, keyed: bool = False) -> None:
        self.keyed = keyed  # a saver signing with a store key opens sealed writes itself
        extra = frozenset(_key(item) for item in allow)
        self.named: frozenset[tuple[str, str]] = (
            frozenset(key for key in SAFE_MSGPACK_TYPES if len(key) == 2) | extra
        )
        # msgpack is read by ``_Read`` alone; LangGraph's reviver (which warns about, or builds
        # unchecked, what it does not know) never sees a stored value.
        super().__init__(allowed_msgpack_modules=True)

    def allowed(self, name: tuple[str, str]) -> bool:
        """Whether a stored value of the type ``name`` (module, class) may be revived."""
        return name in self.named or (name[0] == _STATE and name in _state_types())

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        if kind not in _PAYLOADS:
            raise UnsafeCheckpoint(
                f"a stored checkpoint holds a {printable(str(kind)[:40])!r} value, which "
                "gated-react never writes and does not load"
            )
        if kind != "msgpack":
            return super().loads_typed(data)
        reading = _Read(self.allowed)
        try:
            found = ormsgpack.unpackb(payload, ext_hook=reading, option=ormsgpack.OPT_NON_STR_KEYS)
        except ValueError:
            if reading.refused is None:
                raise
            raise UnsafeCheckpoint(f"a stored checkpoint holds {reading.refused}") from None
        if not self.keyed and is_sealed(found):  # read as it is, it is nothing the graph knows
            raise SignatureRefused(KEY_NEEDED, "keyed")
        return found


def serializer(allow: Iterable[AllowedType] = (), *, keyed: bool = False) -> GuardedSerializer:
    """The serializer for a checkpointer: pass it as ``serde=`` to a saver you build yourself.
    ``allow`` names the types of your own that your state stores (classes or ``(module, name)``).
    ``keyed``: the saver signs with a store key; without one, a row it signed is refused in one
    line (``SignatureRefused``) instead of read as values it does not hold."""
    return GuardedSerializer(allow, keyed=keyed)
