"""Rows that are not what a saver stores: a checkpoint, its metadata or its values of another
shape, or bytes its saver cannot decode (edited with SQL, or damaged). A store with a key
refuses them as it refuses a row whose signature fails (``SignatureRefused``, ``unverified``),
so a reader gets the error the docs name, and a listing shows the thread and goes on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gated_react.errors import GatedReactError, exception_line, printable
from gated_react.store.serializer import SignatureRefused

DECODING = (TypeError, ValueError, AttributeError, KeyError, IndexError)
"""What a saver raises on a row of the wrong shape (a store that fails in use raises its
driver's own errors, which pass)."""


def misshapen(found: Any) -> str | None:
    """What is wrong with the shape of a stored checkpoint (a ``CheckpointTuple``), or None."""
    checkpoint, metadata = getattr(found, "checkpoint", None), getattr(found, "metadata", None)
    if not isinstance(checkpoint, dict):
        return f"holds no checkpoint (a {type(checkpoint).__name__})"
    if not isinstance(metadata, dict):
        return f"holds no metadata (a {type(metadata).__name__})"
    values = checkpoint.get("channel_values")
    if not isinstance(values, dict):
        return f"holds no channel values (a {type(values).__name__})"
    return None


@contextmanager
def decoded(thread: Any) -> Iterator[None]:
    """A saver reading ``thread``'s rows: one it cannot decode is refused, naming the thread."""
    try:
        yield
    except (GatedReactError, UnicodeEncodeError):  # ours; a thread id that is no UTF-8 text
        raise
    except DECODING as exc:
        why = f"{type(exc).__name__}: {exception_line(exc, first_only=True)}"
        raise damaged(thread, f"cannot be decoded ({why})") from None


def damaged(thread: Any, why: str) -> SignatureRefused:
    """The refusal of a row of ``thread`` that is not as a saver stores it."""
    what = f"a checkpoint of thread {printable(str(thread))!r} {why}"
    return SignatureRefused(f"{what}: it was edited or damaged; refused", "unverified")
