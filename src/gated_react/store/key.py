"""The store key: every checkpoint and pending write this package stores is authenticated.

With a key (``open_checkpointer(url, key=...)``, ``GATED_REACT_STORE_KEY``), each checkpoint
carries an HMAC-SHA256 tag in its metadata (``TAG``) over its thread id, namespace, id, parent
id, its metadata, the checkpoint without its values, and the digest of each channel's
serialized bytes (kept beside it, ``VALUES``, so a walk of the parent chain checks a row without
serializing its values again); each pending write is stored as ``(SEALED, index, tag, value)``,
its tag over the checkpoint it belongs to, its task id, index, channel and serialized bytes.
``signed_saver.SignedSaver`` signs and checks them on every read path LangGraph takes, so a
row edited, forged, or copied under another thread or parent is refused (``UnsafeCheckpoint``).

The digests are over the values as the serializer writes them: the serializer
``checkpointer.py`` hands out revives a value that serializes to the same bytes again. Keys
rotate: the first signs, every one is tried when checking.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any

TAG = "gated_react_tag"
"""The metadata key holding a checkpoint's tag."""
VALUES = "gated_react_values"
"""The metadata key holding the digest of a checkpoint's values (covered by its tag)."""
SEALED = "gated-react/signed-write/1"
"""The first item of every pending write stored under a key."""
MIN_KEY_BYTES = 16
WITHOUT = "it was written without the store key, or the row was replaced"
MIGRATE = (
    "a store written without GATED_REACT_STORE_KEY is read without it: finish its threads "
    "first, or keep keyed runs in a new store"
)

Key = str | bytes
KeyInput = Key | Sequence[Key]


class StoreKey:
    """Keys to check tags with; the first also signs (older ones, after it, only read)."""

    __slots__ = ("_keys",)

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

    def __repr__(self) -> str:  # never the keys themselves
        return f"StoreKey(<{len(self._keys)} keys>)"

    def sign(self, digest: bytes) -> str:
        return hmac.digest(self._keys[0], digest, "sha256").hex()

    def holds(self, digest: bytes, tag: object) -> bool:
        if not isinstance(tag, str):
            return False
        return any(
            hmac.compare_digest(hmac.digest(k, digest, "sha256").hex(), tag) for k in self._keys
        )


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
        data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        framed += (len(data).to_bytes(8, "big"), data)
    return hashlib.sha256(b"".join(framed)).digest()


def stored_json(value: Any) -> bytes:
    """JSON as the savers store it (SQLite writes metadata exactly so), keys sorted: Postgres'
    JSONB does not keep their order."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text.encode("utf-8", "ignore")
