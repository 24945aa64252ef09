"""The store key: every checkpoint and pending write this package stores is authenticated.

With a key (``open_checkpointer(url, key=...)``, ``GATED_REACT_STORE_KEY``), each checkpoint
carries an HMAC-SHA256 tag in its metadata (``TAG``) over its thread id, namespace, id, parent
id, its metadata, the checkpoint without its values, and the digest of each channel's
serialized bytes (kept beside it, ``VALUES``, so a walk of the parent chain checks a row without
serializing its values again); each pending write is stored as ``(SEALED_BYTES, index, tag,
type, bytes)``: its value as the serializer wrote it, and a tag over the checkpoint it belongs
to, its task id, index, channel and those bytes (serialized once, checked without serializing
again). A write sealed as ``(SEALED, index, tag, value)`` by an earlier release reads as before.
``signed_saver.SignedSaver`` signs and checks them on every read path LangGraph takes, so a
row edited, forged, or copied under another thread or parent is refused (``UnsafeCheckpoint``).

The digests are over the values as the serializer writes them: the serializer
``checkpointer.py`` hands out revives a value that serializes to the same bytes again. Keys
rotate: the first signs, every one is tried when checking.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from gated_react.jsontext import json_encoder

TAG = "gated_react_tag"
"""The metadata key holding a checkpoint's tag."""
VALUES = "gated_react_values"
"""The metadata key holding the digest of a checkpoint's values (covered by its tag)."""
SEALED = "gated-react/signed-write/1"
"""The first item of a pending write stored under a key with its value (an earlier release's)."""
SEALED_BYTES = "gated-react/signed-write/2"
"""The first item of a pending write stored under a key with its value's serialized bytes."""
MIN_KEY_BYTES = 16
WITHOUT = "it was written without the store key, or the row was replaced"
MIGRATE = (
    "a thread written before the key was set is signed by `gated-react sign --unsigned`, once "
    "you trust the store as it is"
)

Key = str | bytes
KeyInput = Key | Sequence[Key]


class StoreKey:
    """Keys to check tags with; the first also signs (older ones, after it, only read)."""

    __slots__ = ("_keys", "_macs")

    def __init__(self, keys: KeyInput) -> None:
        given = [keys] if isinstance(keys, str | bytes) else list(keys)
        encoded = [k.encode() if isinstance(k, str) else bytes(k) for k in given]
        if not encoded:
            raise ValueError("no store key given")
        if short := [n for n, k in enumerate(encoded, 1) if len(k) < MIN_KEY_BYTES]:
            raise ValueError(
                f"store key {short[0]} of {len(encoded)} is shorter than {MIN_KEY_BYTES} bytes"
                " (make one with: python -c 'import secrets; print(secrets.token_hex(32))')"
            )
        self._keys = tuple(encoded)
        # each key's HMAC set up once: a copy per tag skips the key schedule (a quarter of
        # a tag's cost, and every record and checkpoint is tagged or checked)
        self._macs = tuple(_mac(k) for k in encoded)

    def __reduce__(self) -> tuple[type[StoreKey], tuple[list[bytes]]]:
        return StoreKey, (list(self._keys),)  # copied or pickled as its keys (HMACs are not)

    def __repr__(self) -> str:  # never the keys themselves
        return f"StoreKey(<{len(self._keys)} keys>)"

    def sign(self, digest: bytes) -> str:
        return _tag(self._macs[0], digest)

    def holds(self, digest: bytes, tag: object) -> bool:
        return self.signer(digest, tag) is not None

    def signer(self, digest: bytes, tag: object) -> int | None:
        """Which key signed ``digest`` with ``tag`` (0: the signing one), None: none of them."""
        if not isinstance(tag, str):
            return None
        for n, mac in enumerate(self._macs):
            if hmac.compare_digest(_tag(mac, digest), tag):
                return n
        return None


class _Mac(Protocol):
    """An HMAC set up with its key: ``hmac.HMAC``, or the OpenSSL object inside it."""

    def copy(self) -> _Mac: ...
    def update(self, msg: bytes, /) -> None: ...
    def hexdigest(self) -> str: ...


def _mac(key: bytes) -> _Mac:
    """``key``'s HMAC-SHA256. The OpenSSL object ``hmac.HMAC`` wraps when it has one: the
    same tags, without three Python calls around each of its methods (a step tags 20 rows)."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    inner: _Mac | None = getattr(mac, "_hmac", None)
    return mac if inner is None else inner


def _tag(keyed: _Mac, digest: bytes) -> str:
    mac = keyed.copy()
    mac.update(digest)
    return mac.hexdigest()


def store_key(key: KeyInput | StoreKey | None) -> StoreKey | None:
    """``key`` as a StoreKey (None and an empty list: no key); ValueError for a bad key."""
    if key is None or isinstance(key, StoreKey):
        return key
    if not isinstance(key, str | bytes) and not list(key):
        return None
    return StoreKey(key)


def framed_digest(*parts: bytes | str) -> bytes:
    """SHA-256 of the parts, each framed by its length (no two lists of parts collide)."""
    framed: list[bytes] = []
    for part in parts:
        if part.__class__ is bytes:  # a value's bytes, a digest: its length, then it, uncopied
            framed += (len(part).to_bytes(8, "big"), part)
        else:
            framed.append(_FRAMED.get(part) or _framed(part))  # type: ignore[arg-type]
    return hashlib.sha256(b"".join(framed)).digest()


def _framed(part: bytes | str) -> bytes:
    """``part`` as a digest frames it: its length in 8 bytes, then its bytes."""
    data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
    framed = len(data).to_bytes(8, "big") + data
    if part.__class__ is str and len(part) <= _FRAMED_CHARS:
        if len(_FRAMED) >= _FRAMED_KEPT:
            _FRAMED.clear()
        _FRAMED[part] = framed
    return framed


# Short strings framed before: a digest's parts are mostly the same few (its kind, the
# thread, the task, the channel, the serializer's type), and framing each anew was a third of
# a digest's cost.
_FRAMED: dict[str, bytes] = {}
_FRAMED_KEPT = 1024
_FRAMED_CHARS = 128
_RECORD = _framed("record/1")


def stored_json(value: Any) -> bytes:
    """JSON as the savers store it (SQLite writes metadata exactly so), keys sorted: Postgres'
    JSONB does not keep their order."""
    return _STORED(value).encode("utf-8", "ignore")


# ``json.dumps`` with these options, made once: every checkpoint a keyed store writes encodes
# its metadata and versions so, and ``json.dumps`` would build a new encoder for each.
_STORED = json_encoder(sort_keys=True, ensure_ascii=False, default=str)


# ---- what is signed ----


class Serde(Protocol):
    """What the digests need of a saver's serializer: the bytes it stores a value as."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]: ...


Where = tuple[str, str, str, str | None]
"""Where a checkpoint is: thread id, namespace, checkpoint id, parent id."""


def where_of(found: Any) -> Where:
    """Where a stored checkpoint (a ``CheckpointTuple``) is."""
    c = found.config["configurable"]
    parent = found.parent_config["configurable"]["checkpoint_id"] if found.parent_config else None
    return str(c["thread_id"]), str(c.get("checkpoint_ns", "")), str(c["checkpoint_id"]), parent


def stored_metadata(metadata: Mapping[str, Any]) -> bytes:
    """The metadata a tag covers: all of it but the tag and digest ("writes" is dropped by the
    Postgres saver: LangGraph no longer reads it)."""
    return stored_json({k: v for k, v in metadata.items() if k not in (TAG, VALUES, "writes")})


def header_digest(where: Where, checkpoint: Mapping[str, Any], metadata: bytes,
                  values: bytes) -> bytes:  # fmt: skip
    """What a checkpoint's tag covers: where the row is, all of it but its values, and the
    digest of its values (kept in the metadata: a walk of the parent chain checks rows without
    serializing their values again)."""
    thread, ns, cid, parent = where
    skeleton = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    parts: list[bytes | str] = [thread, ns, cid, parent or "", stored_json(skeleton)]
    return framed_digest("checkpoint", *parts, metadata, values)


def value_digest(serde: Serde, channel: str, value: Any) -> bytes:
    """The digest of one channel's value, as the serializer stores it."""
    return framed_digest(channel, *serde.dumps_typed(value))


def values_digest(serde: Serde, values: Mapping[str, Any]) -> bytes:
    """The digest of a checkpoint's channel values, from the values themselves."""
    return framed_digest(*(value_digest(serde, ch, values[ch]) for ch in sorted(values)))


def write_digest(serde: Serde, where: tuple[str, str, str], task: str, *, idx: int,
                 channel: str, value: Any) -> bytes:  # fmt: skip
    """What a pending write's tag covers: its checkpoint (thread, namespace, id), task, index,
    channel and value (as the serializer stores it: ``typed_write_digest``)."""
    return typed_write_digest(where, task, idx, channel, serde.dumps_typed(value))


def typed_write_digest(where: tuple[str, str, str], task: str, idx: int, channel: str,
                       typed: tuple[str, bytes]) -> bytes:  # fmt: skip
    """A pending write's digest from its serialized value (``Serde.dumps_typed``'s pair)."""
    thread, ns, cid = where
    return framed_digest("write", thread, ns, cid, task, str(idx), channel, *typed)


Sealed = tuple[str, int, str, str, bytes]
"""A pending write as stored under a key: ``(SEALED_BYTES, index, tag, type, bytes)``."""


def sealed_write(key: StoreKey, serde: Serde, where: tuple[str, str, str], task: str, *,
                 idx: int, channel: str, value: Any) -> Sealed:  # fmt: skip
    """A pending write as a saver with ``key`` stores it: its value serialized once, the bytes
    both signed and stored (the saver then stores bytes, not the value again)."""
    kind, data = serde.dumps_typed(value)
    tag = key.sign(typed_write_digest(where, task, idx, channel, (kind, data)))
    return SEALED_BYTES, idx, tag, kind, data


def row_signer(key: StoreKey, where: Where, checkpoint: Mapping[str, Any],
               metadata: Mapping[str, Any]) -> int | None:  # fmt: skip
    """Which key signed a checkpoint row as it is stored (its values are checked against the
    digest it carries apart: ``values_digest``); None: no key given did."""
    tag, values = metadata.get(TAG), metadata.get(VALUES)
    try:
        digest = bytes.fromhex(values) if isinstance(values, str) else b""
    except ValueError:
        digest = b""
    return key.signer(header_digest(where, checkpoint, stored_metadata(metadata), digest), tag)


def record_digest(
    thread: str, run: str, kind: str, key: str, *, body: Mapping[str, Any] | str, at: float
) -> bytes:
    """What a run record's signature covers (``_engine/authority/records.py``): its thread,
    run, kind and key, its body as JSON with sorted keys (``record_text``, or that text
    itself), and when it was written."""
    text = body if isinstance(body, str) else record_text(body)
    # framed_digest("record/1", thread, run, kind, key, text, repr(float(at))), in one list:
    # the thread, the run and the kind repeat (framed once), the rest is each record's own
    # (framed as it comes, kept out of the table of repeated parts)
    framed = [_RECORD, _FRAMED.get(thread) or _framed(thread), _FRAMED.get(run) or _framed(run),
              _FRAMED.get(kind) or _framed(str(kind)), _framed_once(key), _framed_once(text),
              _framed_once(repr(float(at)))]  # fmt: skip
    return hashlib.sha256(b"".join(framed)).digest()


def _framed_once(part: bytes | str) -> bytes:
    """``part`` framed as ``_framed`` frames it, not kept."""
    data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
    return len(data).to_bytes(8, "big") + data


def record_text(body: Mapping[str, Any]) -> str:
    """A record's body as its signature covers it, and as it is stored: JSON, keys sorted."""
    return _RECORD_BODY(body)


_RECORD_BODY = json_encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def is_sealed(value: Any) -> bool:
    """A pending write as a saver with a store key stores it (``SEALED_BYTES``, ``SEALED``)."""
    if not isinstance(value, list | tuple):
        return False
    size = len(value)
    return (size == 5 and value[0] == SEALED_BYTES) or (size == 4 and value[0] == SEALED)


def write_signer(key: StoreKey, serde: Serde, where: tuple[str, str, str], task: str, *,
                 channel: str, sealed: Any) -> int | None:  # fmt: skip
    """Which key sealed a stored pending write; None: it is not sealed, or no key given did."""
    if not is_sealed(sealed) or not isinstance(sealed[1], int):
        return None
    if sealed[0] == SEALED:
        digest = write_digest(serde, where, task, idx=sealed[1], channel=channel, value=sealed[3])
    elif isinstance(sealed[3], str) and isinstance(sealed[4], bytes):
        digest = typed_write_digest(where, task, sealed[1], channel, (sealed[3], sealed[4]))
    else:
        return None
    return key.signer(digest, sealed[2])


def unsealed(serde: Any, sealed: Sequence[Any]) -> Any:
    """The value of a sealed pending write (its bytes read by ``serde``, a ``SEALED_BYTES``'s)."""
    return serde.loads_typed((sealed[3], sealed[4])) if sealed[0] == SEALED_BYTES else sealed[3]
