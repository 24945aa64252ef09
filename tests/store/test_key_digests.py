"""What a store key signs and how: the digests of checkpoint headers, records and framed parts
(the same as earlier releases made them, however often their parts were framed before), and
the tags over them."""

from __future__ import annotations

import copy
import hashlib
import hmac
import pickle
from datetime import UTC, datetime

from gated_react.store import key as key_module
from gated_react.store.key import (
    StoreKey,
    framed_digest,
    header_digest,
    record_digest,
    stored_metadata,
)


def test_what_is_signed_is_what_earlier_releases_signed() -> None:
    """A store signed by an earlier release must still verify: the digests of a checkpoint's
    header (non-ASCII names, a value JSON cannot hold, nested versions) and of a record are
    pinned as 0.1.0 made them."""
    checkpoint = {
        "v": 4, "id": "1f1f", "ts": "2026-12-06T08:11:32+00:00", "channel_values": {"step": 1},
        "channel_versions": {"step": "00000000000000000000000000000040.0.1", "é": 3},
        "versions_seen": {"gate": {"branch:to:gate": "0039.0.1"}, "__input__": {}},
        "updated_channels": ["step"],
    }  # fmt: skip
    metadata = {"source": "loop", "step": 38, "parents": {}, "note": "naïve",
                "when": datetime(2026, 12, 6, tzinfo=UTC)}  # fmt: skip
    header = header_digest(("t", "", "1f1f", "p"), checkpoint, stored_metadata(metadata), b"v" * 32)
    assert header.hex() == "6e3fdfd1584b90e4e4a311c78ed609ec9422c918d84bf45e0e61841939e5147f"
    body = {"call": "c", "args": {"b": [1, 2.5], "a": "é"}}
    record = record_digest("t", "q", "permit", "k", body=body, at=1e9 + 0.25)
    assert record.hex() == "becd1844ceb41939d678f799e188d6b6748300a4f6111399f36de2b7a545d6f7"


def test_a_key_is_copied_and_pickled_as_its_keys() -> None:
    """A saver holding a key may be copied (its HMACs, set up once, cannot be)."""
    key = StoreKey(["k" * 32, "o" * 32])
    digest = b"d" * 32
    for copied in (copy.deepcopy(key), copy.copy(key), pickle.loads(pickle.dumps(key))):
        assert copied.sign(digest) == key.sign(digest)
        assert copied.signer(digest, StoreKey("o" * 32).sign(digest)) == 1  # the older key


def _framed_as_specified(*parts: bytes | str) -> bytes:
    """SHA-256 of each part's length in 8 bytes then its bytes (UTF-8, surrogates passed)."""
    data = [p.encode("utf-8", "surrogatepass") if isinstance(p, str) else p for p in parts]
    return hashlib.sha256(b"".join(len(d).to_bytes(8, "big") + d for d in data)).digest()


class _Name(str):
    """A str subclass, as an app's own id type might be."""


def test_a_digest_is_the_same_however_often_its_parts_were_framed() -> None:
    """Parts framed before are reused: the digest must not change with that, for strings that
    are kept (short), that are not (long), that are not plain ``str``, bytes that read as the
    same characters, surrogates, and after the kept frames are dropped."""
    parts: list[tuple[bytes | str, ...]] = [
        ("write", "thread", "", "1f1f", "task", "0", "step", "msgpack", b"\x81\xa1a\x01"),
        ("write", b"thread", "", "1f1f"),  # bytes spelling a kept string: framed the same
        ("é\ud800", "x" * 129, _Name("thread"), "", b""),
        ("ab", "c"),
        ("a", "bc"),  # the same characters in other parts: another digest
    ]
    expected = [_framed_as_specified(*p) for p in parts]
    assert expected[3] != expected[4]
    for _ in range(2):  # cold, then with every short part kept
        assert [framed_digest(*p) for p in parts] == expected
    for n in range(key_module._FRAMED_KEPT + 10):  # past the bound: the kept frames go
        framed_digest(f"filler {n}")
    assert len(key_module._FRAMED) <= key_module._FRAMED_KEPT
    assert [framed_digest(*p) for p in parts] == expected
    assert "x" * 129 not in key_module._FRAMED


def test_a_tag_is_hmac_sha256_of_the_digest() -> None:
    """The tags every earlier release checks: HMAC-SHA256 under the key, in hex."""
    digest = hashlib.sha256(b"row").digest()
    expected = hmac.new(b"k" * 32, digest, hashlib.sha256).hexdigest()
    key = StoreKey(["k" * 32, "o" * 32])
    assert key.sign(digest) == expected
    assert key.signer(digest, expected) == 0
    assert key.signer(digest, hmac.new(b"o" * 32, digest, hashlib.sha256).hexdigest()) == 1
    assert key.signer(hashlib.sha256(b"other").digest(), expected) is None
