"""What a node reads: the channels as the state models it works from, each value validated once.

LangGraph hands a node the channel values as stored: the plain JSON the nodes wrote, or
whatever a caller wrote (a resumed checkpoint, ``update_state``, Studio's edit, a command's
update). Validating the whole state again at every node cost more with every step (decide's
``State`` took 1.4 ms at 300 history entries, most of a step), though all but one or two
values were ones a node of the same run had just written and the node before had validated.

So a value is validated the first time a node of this process reads it, and its validated form
is kept by the value's identity: a node that reads the same object again (LangGraph hands a
value on, as it was written, until a node writes the channel again) takes that form without
validating again. The logs are kept entry by entry, so a step validates its new entries only.
A value from anywhere else is a new object, and is validated: a checkpoint read from a store
(on resume, or by ``get_state`` and ``update_state``) is decoded into new objects, and an edit
writes new ones. What a miss costs is one validation, as before; nothing is taken on trust.

The forms are shared by every node that reads the value, so they are treated as immutable: the
nodes derive new models (``model_copy``) and new lists, never change one in place. A value
changed in place after it was read keeps its earlier, validated form here (LangGraph's channel
values are not to be changed in place; no node of this package does).
"""

from __future__ import annotations

import copy
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from types import NoneType, UnionType
from typing import (
    Annotated,
    Any,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

import typing_extensions
from langgraph.channels.base import BaseChannel
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, with_config
from pydantic.fields import FieldInfo

from gated_react.state import CoreState

S = TypeVar("S", bound=CoreState)
T = TypeVar("T")

KEPT = 8192
"""Validated values kept at once (the oldest go first): a run's logs plus the values of a few
hundred runs in flight. A value no longer kept is validated again when it is next read."""


class _Forms:
    """Validated forms by the identity of the value they were validated from and the adapter
    that validated it (thread-safe: the sync graph runs nodes on pool threads). Each entry holds
    its value, so an id is never reused while its entry is kept."""

    def __init__(self, kept: int) -> None:
        self._kept = kept
        self._forms: OrderedDict[Hashable, tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def one(self, value: Any, adapter: TypeAdapter[Any]) -> Any:
        """``value`` validated by ``adapter``, or the form it had when last validated."""
        key = (id(adapter), id(value))
        found = self._forms.get(key)
        if found is not None and found[0] is value:
            return found[1]
        form = adapter.validate_python(value)
        self._keep(key, value, form)
        return form

    def log(self, value: Any, adapter: TypeAdapter[list[Any]]) -> list[Any]:
        """A list validated by ``adapter``, its entries validated once: a list that starts with
        the very entries of one validated before (an append-only log after a step: the same
        objects, then new ones) validates only what follows them. Kept by its first entry, so
        each run's log has its own place."""
        if type(value) is not list or not value:  # what pydantic takes for a list, or its error
            return adapter.validate_python(value)
        key = (id(adapter), id(value[0]))
        found = self._forms.get(key)
        if found is None:
            forms = adapter.validate_python(value)
        else:
            before, known = found
            if value is before and len(value) == len(known):
                return list(known)
            if len(value) >= len(before) and all(map(operator.is_, value, before)):
                forms = [*known, *adapter.validate_python(value[len(before) :])]
            else:  # an entry replaced (a message under its own id) or the log overwritten
                forms = adapter.validate_python(value)
        self._keep(key, value, forms)
        return list(forms)

    def derived(self, tag: Hashable, entries: Sequence[Any], build: Callable[[], T]) -> T:
        """What ``build()`` makes of ``entries`` (forms read here, which never change), built
        once while kept: a later call under ``tag`` with the very same entries, in order, gets
        the same result. Kept by ``tag``, the first entry and the count."""
        key = (tag, id(entries[0]) if entries else 0, len(entries))
        found = self._forms.get(key)
        if found is not None and all(map(operator.is_, found[0], entries)):
            result: T = found[1]
            return result
        result = build()
        self._keep(key, list(entries), result)
        return result

    def _keep(self, key: Hashable, value: Any, form: Any) -> None:
        with self._lock:
            self._forms[key] = (value, form)
            self._forms.move_to_end(key)
            while len(self._forms) > self._kept:
                self._forms.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._forms.clear()


FORMS = _Forms(KEPT)
"""This process's validated channel values."""


_PLAIN, _ONE, _LOG = 0, 1, 2
_MISSING: Any = object()


@dataclass(frozen=True)
class _Plan:
    """How each field of a state model is read, in the fields' order: a model (or None) as one
    value (``_ONE``), a list as a log whose new entries are validated (``_LOG``); text and
    numbers (``_PLAIN``) are validated together, as the fields of one ``TypedDict``."""

    fields: tuple[tuple[str, int, TypeAdapter[Any] | None, Callable[[], Any]], ...]
    """Each field's name, kind, adapter (None for a plain one) and default."""
    plain: TypeAdapter[dict[str, Any]]


def read(schema: type[S], channels: S | Mapping[str, Any], reads: type | None = None) -> S:
    """``channels`` as ``schema``, validated as ``schema(**channels)`` validates them (with the
    same error, should one not validate), each value at most once while it is kept
    (``FORMS``). With ``reads`` (a node's ``TypedDict`` of the channels it reads) the model
    holds those fields only: reading another raises ``AttributeError``, so a node cannot work
    from a default it never read. A model passed in (a node called by hand) is taken as is."""
    if isinstance(channels, schema):
        return channels
    given = cast(Mapping[str, Any], channels)
    plan = _plan(schema, reads)
    values: dict[str, Any] = {}
    plain: dict[str, Any] = {}
    found = 0
    try:
        for name, kind, adapter, default in plan.fields:
            value = given.get(name, _MISSING)
            if value is _MISSING:
                values[name] = default()
                continue
            found += 1
            if kind == _LOG:
                values[name] = FORMS.log(value, adapter)  # type: ignore[arg-type]
            elif kind == _ONE:
                values[name] = FORMS.one(value, adapter)  # type: ignore[arg-type]
            else:
                values[name] = plain[name] = value
        if found != len(given) and not set(given) <= set(schema.model_fields):
            raise _NotAField  # a key that is no field: the error says which
        values.update(plan.plain.validate_python(plain))
    except (ValidationError, _NotAField):
        schema.model_validate(dict(given))  # the error whole-state validation gives
        raise
    return _built(schema, values, set(given) & values.keys())


class _NotAField(Exception):
    pass


def _built(schema: type[S], values: dict[str, Any], fields_set: set[str]) -> S:
    """``schema.model_construct(fields_set, **values)``: what it does, without its loop over
    the fields' aliases and defaults (which cost more than the rest of a read), and with only
    the fields read. ``_plan`` checks the state models have none of what that loop is for."""
    built = schema.__new__(schema)
    object.__setattr__(built, "__dict__", values)
    object.__setattr__(built, "__pydantic_fields_set__", fields_set)
    object.__setattr__(built, "__pydantic_extra__", None)
    object.__setattr__(built, "__pydantic_private__", None)
    return built


@cache
def _plan(schema: type[BaseModel], reads: type | None) -> _Plan:
    if (
        schema.model_config.get("extra") == "allow"
        or schema.__pydantic_post_init__
        or schema.__private_attributes__
        or any(f.alias or f.validation_alias for f in schema.model_fields.values())
    ):
        raise TypeError(f"{schema.__name__} is not a state model read() can build")
    named = set(schema.model_fields) if reads is None else set(get_type_hints(reads))
    if not named <= set(schema.model_fields):
        raise TypeError(f"{sorted(named - set(schema.model_fields))} are no fields of {schema}")
    fields: list[tuple[str, int, TypeAdapter[Any] | None, Callable[[], Any]]] = []
    plain: dict[str, Any] = {}
    for name, field in schema.model_fields.items():
        if name not in named:
            continue
        annotation: Any = field.annotation
        constrained = any(not isinstance(m, BaseChannel) for m in field.metadata)
        if get_origin(annotation) is list and not constrained:
            fields.append((name, _LOG, _adapter(annotation), _default(field)))
        elif _holds_models(annotation) or get_origin(annotation) is list:
            fields.append((name, _ONE, _adapter(annotation), _default(field)))
        else:
            fields.append((name, _PLAIN, None, _default(field)))
            plain[name] = annotation
    typed: Any = typing_extensions.TypedDict(f"{schema.__name__}Plain", plain, total=False)  # type: ignore[misc]
    closed: Any = with_config(ConfigDict(extra="forbid"))(typed)
    plain_adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(closed)
    return _Plan(tuple(fields), plain_adapter)


def _default(field: FieldInfo) -> Callable[[], Any]:
    if field.default_factory is not None:
        return field.default_factory  # type: ignore[return-value]  # none takes the data
    value = field.default
    if value is None or isinstance(value, str | int | float):
        return lambda: value
    return lambda: copy.deepcopy(value)  # as pydantic copies a mutable default


@cache
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    """One adapter per type, so a value read as ``CoreState`` and as ``State`` is validated
    once."""
    return TypeAdapter(annotation)


def _holds_models(annotation: Any) -> bool:
    """Whether values of ``annotation`` are models: worth keeping by identity, where text and
    numbers are validated faster than they are looked up."""
    if isinstance(annotation, type):
        return issubclass(annotation, BaseModel)
    if get_origin(annotation) in (Union, UnionType, Annotated):
        return any(_holds_models(arg) for arg in get_args(annotation) if arg is not NoneType)
    return False
