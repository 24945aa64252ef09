"""What a node reads: the channels as the state models it works from, each value validated once.

LangGraph hands a node the channel values as stored: the plain JSON the nodes wrote, or
whatever a caller wrote (a resumed checkpoint, ``update_state``, Studio's edit, a command's
update). Validating the whole state again at every node cost more with every step (decide's
``State`` took 1.4 ms at 300 history entries, most of a step), though all but one or two
values were ones a node of the same run had just written and the node before had validated.

So a value is validated the first time a node of the run reads it, and its validated form is
kept by the value's identity: a node that reads the same object again (LangGraph hands a value
on, as it was written, until a node writes the channel again) takes that form without
validating again; a log that starts with the very entries read before validates only the new
ones. A value from anywhere else is a new object, and is validated: a checkpoint read from a
store (on resume, or by ``get_state`` and ``update_state``) is decoded into new objects, and an
edit writes new ones. A miss costs one validation, as before; nothing is taken on trust.

What is kept is the run's own (``Known``, one per thread): the form of the value each channel
last held, and what the transcript built from them. It goes when the run ends (``finish``,
``stop``), and a run that pauses or dies keeps it only until newer runs push it out
(``THREADS``): nothing outlives the runs that read it, so a process serving many runs holds no
more than the runs in flight. The forms are shared by the nodes that read them, so they are
treated as immutable: the nodes derive new models (``model_copy``) and lists, never change one
in place (LangGraph's channel values are not to be changed in place either; no node does).
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
from langchain_core.runnables import RunnableConfig
from langgraph.channels.base import BaseChannel
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, with_config
from pydantic.fields import FieldInfo

from gated_react._engine.langgraph_internals import beside_a_question, node_name, run_key
from gated_react.errors import GatedReactError, MisroutedStep
from gated_react.state import CoreState

S = TypeVar("S", bound=CoreState)
T = TypeVar("T")

THREADS = 256
"""Threads whose runs' forms are kept at once (the least recently read go first): a run that
ends drops its own, so these are runs in flight and runs that paused or died."""
BUILT = 64
"""What the transcript built that a thread keeps (the oldest goes first): a step's messages
for each step shown, and the summary."""


class Known:
    """What one thread's run has read: each channel's value as last read with its form, and
    what was built from forms (``derived``). Used by one node at a time (one run advances a
    thread); its lock guards the one change that is not a single dict operation."""

    __slots__ = ("_built", "_fields", "_lock")

    def __init__(self) -> None:
        self._fields: dict[str, tuple[Any, Any]] = {}
        self._built: OrderedDict[Hashable, tuple[list[Any], Any]] = OrderedDict()
        self._lock = threading.Lock()

    def one(self, field: str, value: Any, adapter: TypeAdapter[Any]) -> Any:
        """``value`` validated by ``adapter``, or its form when it was last read."""
        found = self._fields.get(field)
        if found is not None and found[0] is value:
            return found[1]
        form = adapter.validate_python(value)
        self._fields[field] = (value, form)
        return form

    def log(self, field: str, value: Any, adapter: TypeAdapter[list[Any]]) -> list[Any]:
        """A list validated by ``adapter``, its entries validated once: a list that starts with
        the very entries of the one read before (an append-only log after a step: the same
        objects, then new ones) validates only what follows them."""
        if type(value) is not list:  # what pydantic takes for a list, or its error
            return adapter.validate_python(value)
        found = self._fields.get(field)
        if found is None:
            forms = adapter.validate_python(value)
        else:
            before, known = found
            kept = len(before) == len(known)  # not changed in place since it was read
            if kept and value is before:
                return list(known)
            if kept and len(value) >= len(known) and all(map(operator.is_, value, before)):
                forms = [*known, *adapter.validate_python(value[len(known) :])]
            else:  # an entry replaced (a message under its own id) or the log overwritten
                forms = adapter.validate_python(value)
        self._fields[field] = (value, forms)
        return list(forms)

    def derived(self, tag: Hashable, entries: Sequence[Any], build: Callable[[], T]) -> T:
        """What ``build()`` makes of ``entries`` (forms, which never change), built once while
        kept: a later call under ``tag`` with the very same entries, in order, gets the same
        result. Kept by ``tag``, the first entry and the count."""
        key = (tag, id(entries[0]) if entries else 0, len(entries))
        found = self._built.get(key)
        if found is not None and all(map(operator.is_, found[0], entries)):
            result: T = found[1]
            return result
        result = build()
        with self._lock:
            self._built[key] = (list(entries), result)
            while len(self._built) > BUILT:
                self._built.popitem(last=False)
        return result


class _Runs:
    """Each thread's ``Known``, for the runs in flight (thread-safe: the sync graph runs nodes
    on pool threads, and one process serves many threads)."""

    def __init__(self, threads: int) -> None:
        self._threads = threads
        self._known: OrderedDict[Hashable, Known] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, config: RunnableConfig | None) -> Known:
        """What this thread's run has read (a fresh ``Known`` for a node called by hand)."""
        if config is None:
            return Known()
        key = run_key(config)
        with self._lock:
            found = self._known.get(key)
            if found is None:
                found = self._known[key] = Known()
                while len(self._known) > self._threads:
                    self._known.popitem(last=False)
            else:
                self._known.move_to_end(key)
        return found

    def end(self, config: RunnableConfig | None) -> None:
        """The run on this thread has ended: what it read goes."""
        if config is not None:
            with self._lock:
                self._known.pop(run_key(config), None)

    def __len__(self) -> int:
        return len(self._known)


RUNS = _Runs(THREADS)
"""This process's runs in flight, by thread."""


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


def read(
    schema: type[S],
    channels: S | Mapping[str, Any],
    reads: type | None = None,
    config: RunnableConfig | None = None,
) -> S:
    """``channels`` as ``schema``, validated as ``schema(**channels)`` validates them (with the
    same error, should one not validate), each value once in the run on ``config``'s thread
    (``RUNS``). With ``reads`` (a node's ``TypedDict`` of the channels it reads) the model
    holds those fields only: reading another raises ``AttributeError``, so a node cannot work
    from a default it never read. A model passed in (a node called by hand) is taken as is."""
    if isinstance(channels, schema):
        return channels
    if config is not None and beside_a_question(config):
        # Every node reads first: one home for the refusal, before anything is asked or run.
        raise MisroutedStep(node_name(config), "beside another node's waiting question")
    given = cast(Mapping[str, Any], channels)
    plan = _plan(schema, reads)
    known = RUNS.of(config)
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
                values[name] = known.log(name, value, adapter)  # type: ignore[arg-type]
            elif kind == _ONE:
                values[name] = known.one(name, value, adapter)  # type: ignore[arg-type]
            else:
                values[name] = plain[name] = value
        if found != len(given) and not set(given) <= set(schema.model_fields):
            raise _NotAField  # a key that is no field: the error says which
        values.update(plan.plain.validate_python(plain))
    except (ValidationError, _NotAField):
        schema.model_validate(dict(given))  # the error whole-state validation gives
        raise
    return _built(schema, values, set(given) & values.keys())


class _NotAField(GatedReactError):
    """A stored key that names no field of the schema: validated the slow way, never raised out."""


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
