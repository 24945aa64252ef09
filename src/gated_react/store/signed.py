"""The saver that signs: ``SignedSaver`` wraps any LangGraph saver, signs every checkpoint and
pending write it stores with a ``StoreKey`` and checks them on every read (``key.py``
says what is signed). One class for every saver: the wrapped saver's own sync and async
methods, which call each other, never sign or check twice."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_metadata,
)

from gated_react.errors import printable
from gated_react.store.damage import damaged, decoded, misshapen
from gated_react.store.key import (
    MIGRATE,
    TAG,
    VALUES,
    WITHOUT,
    StoreKey,
    framed_digest,
    header_digest,
    row_signer,
    sealed_write,
    stored_metadata,
    unsealed,
    value_digest,
    values_digest,
    where_of,
    write_signer,
)
from gated_react.store.serializer import Signature, SignatureRefused, UnsafeCheckpoint

_WRITTEN_MAX = 4096  # channel digests remembered per saver (a few runs' worth)


def _thread(config: RunnableConfig | None) -> str:
    return str(((config or {}).get("configurable") or {}).get("thread_id", "?"))


def _refused(found: CheckpointTuple, why: str, kind: Signature = "unverified") -> UnsafeCheckpoint:
    thread, _, cid, _ = where_of(found)
    what = f"checkpoint {printable(cid)} of thread {printable(thread)!r} {why}"
    return SignatureRefused(what, kind)


_MISMATCH = (
    "does not match its signature: it was edited, copied from another thread or parent, or"
    " signed with a key not in GATED_REACT_STORE_KEY; refused"
)


class SignedSaver(BaseCheckpointSaver[Any]):
    """``inner`` with every checkpoint and write it stores signed, and checked when read."""

    def __init__(self, inner: BaseCheckpointSaver[Any], key: StoreKey) -> None:
        if getattr(inner.serde, "keyed", True) is False:  # it would refuse the writes we seal
            raise ValueError("a saver signing with a store key needs serializer(keyed=True)")
        super().__init__(serde=inner.serde)
        self.inner, self.key = inner, key
        self._written: dict[tuple[str, str, str, str], bytes] = {}  # values this saver signed

    def __getattr__(self, name: str) -> Any:  # conn, lock, setup, ...: the wrapped saver's
        if name in ("inner", "_written"):  # not set yet (copy.copy, __init__)
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def config_specs(self) -> list[Any]:
        return self.inner.config_specs

    # ---- what is signed ----

    def _values_digest(self, thread: str, ns: str, checkpoint: Checkpoint, writing: bool) -> bytes:
        values, versions = checkpoint["channel_values"], checkpoint["channel_versions"]
        if not writing:  # what the store holds: always from its bytes
            return values_digest(self.serde, values)
        parts: list[bytes | str] = []
        for channel in sorted(values):
            # A channel keeps its value until its version changes: a superstep that updates
            # one channel serializes that one again, not every channel of the state.
            seen = (thread, ns, channel, str(versions.get(channel)))
            if (digest := self._written.get(seen)) is None:
                if len(self._written) > _WRITTEN_MAX:
                    self._written.clear()
                digest = self._written[seen] = value_digest(self.serde, channel, values[channel])
            parts.append(digest)
        return framed_digest(*parts)

    def _signed(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> CheckpointMetadata:
        c = config["configurable"]
        thread, ns = str(c["thread_id"]), str(c.get("checkpoint_ns", ""))
        where = (thread, ns, str(checkpoint["id"]), c.get("checkpoint_id"))
        stored = stored_metadata(get_checkpoint_metadata(config, metadata))
        values = self._values_digest(thread, ns, checkpoint, writing=True)
        tag = self.key.sign(header_digest(where, checkpoint, stored, values))
        return cast(CheckpointMetadata, {**metadata, TAG: tag, VALUES: values.hex()})

    def _sealed(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str
    ) -> list[tuple[str, Any]]:
        c = config["configurable"]
        where = (str(c["thread_id"]), str(c.get("checkpoint_ns", "")), str(c["checkpoint_id"]))
        key, serde = self.key, self.serde
        return [
            (ch, sealed_write(key, serde, where, task_id, idx=i, channel=ch, value=v))
            for i, (ch, v) in enumerate(writes)
        ]

    # ---- what is checked ----

    def _checked(self, found: CheckpointTuple | None) -> CheckpointTuple | None:
        if found is None:
            return None
        self._check_row(found)
        self._check_values(found)
        writes = [self._opened(found, w) for w in found.pending_writes or ()]
        metadata = {k: v for k, v in found.metadata.items() if k not in (TAG, VALUES)}
        return found._replace(metadata=cast(CheckpointMetadata, metadata), pending_writes=writes)

    def _check_row(self, found: CheckpointTuple) -> None:
        """The row is where it was signed, with the parent and metadata it was signed with."""
        where = where_of(found)
        if (why := misshapen(found)) is not None:
            raise damaged(where[0], why)
        if where[2] != found.checkpoint.get("id"):
            raise _refused(found, f"holds checkpoint {printable(str(found.checkpoint.get('id')))}")
        if found.metadata.get(TAG) is None:
            why = f"is not signed with the store key ({WITHOUT}); {MIGRATE}"
            raise _refused(found, why, "unsigned")
        if row_signer(self.key, where, found.checkpoint, found.metadata) is None:
            raise _refused(found, _MISMATCH)

    def _check_values(self, found: CheckpointTuple) -> None:
        """Its values are the ones signed (after ``_check_row``, which vouches for the digest)."""
        thread, ns, _, _ = where_of(found)
        digest = self._values_digest(thread, ns, found.checkpoint, writing=False)
        if not hmac.compare_digest(digest.hex(), str(found.metadata.get(VALUES))):
            raise _refused(found, _MISMATCH)

    def _opened(self, found: CheckpointTuple, write: tuple[str, str, Any]) -> tuple[str, str, Any]:
        task, channel, sealed = write
        where = where_of(found)[:3]
        if write_signer(self.key, self.serde, where, task, channel=channel, sealed=sealed) is None:
            why = f"has a pending write to {printable(channel)!r} that is not signed by the key"
            raise _refused(found, f"{why} (edited, forged or copied); refused")
        with decoded(where[0]):
            return task, channel, unsealed(self.serde, sealed)

    # ---- the saver's interface ----

    # A row its saver cannot decode is refused as one edited (``damage.py``); what the store
    # itself raises in use passes.

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        with decoded(_thread(config)):
            found = self.inner.get_tuple(config)
        return self._checked(found)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        with decoded(_thread(config)):
            found = await self.inner.aget_tuple(config)
        return self._checked(found)

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        rows = self.inner.list(config, **kwargs)
        while True:
            with decoded(_thread(config)):
                found = next(rows, None)
            if found is None:
                return
            yield self._checked(found)  # type: ignore[misc]

    async def alist(
        self, config: RunnableConfig | None, **kwargs: Any
    ) -> AsyncIterator[CheckpointTuple]:
        rows = self.inner.alist(config, **kwargs)
        while True:
            with decoded(_thread(config)):
                found = await anext(rows, None)
            if found is None:
                return
            yield self._checked(found)  # type: ignore[misc]

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        signed = self._signed(config, checkpoint, metadata)
        return self.inner.put(config, checkpoint, signed, new_versions)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        signed = self._signed(config, checkpoint, metadata)
        return await self.inner.aput(config, checkpoint, signed, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.inner.put_writes(config, self._sealed(config, writes, task_id), task_id, task_path)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        sealed = self._sealed(config, writes, task_id)
        await self.inner.aput_writes(config, sealed, task_id, task_path)

    # The history a DeltaChannel is rebuilt from: BaseCheckpointSaver's walk of the parent
    # chain (the savers' fast paths read rows unchecked), each row checked without serializing
    # its values again, each write and seed used checked in full.

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        walk = _History(self, channels)
        with decoded(_thread(config)):
            cursor = walk.target(self.inner.get_tuple(config)) if channels else None
            while cursor is not None:
                cursor = walk.ancestor(self.inner.get_tuple(cursor))
        return walk.result()

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        walk = _History(self, channels)
        with decoded(_thread(config)):
            cursor = walk.target(await self.inner.aget_tuple(config)) if channels else None
            while cursor is not None:
                cursor = walk.ancestor(await self.inner.aget_tuple(cursor))
        return walk.result()

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)

    def delete_thread(self, thread_id: str) -> None:
        self.inner.delete_thread(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.inner.adelete_thread(thread_id)

    # What deletes rows is the wrapped saver's own (deleting needs no signature). Copying a
    # thread would need signing again under the new thread id; no saver here implements it.

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.inner.delete_for_runs(run_ids)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self.inner.adelete_for_runs(run_ids)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.inner.prune(thread_ids, strategy=strategy)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self.inner.aprune(thread_ids, strategy=strategy)

    def with_allowlist(self, extra_allowlist: Iterable[tuple[str, ...]]) -> SignedSaver:
        inner = self.inner.with_allowlist(list(extra_allowlist))
        return self if inner is self.inner else SignedSaver(inner, self.key)


class _History:
    """``BaseCheckpointSaver.get_delta_channel_history``'s walk, over checked rows: the writes
    of each ancestor to the channels asked for, back to the nearest one holding a value."""

    def __init__(self, saver: SignedSaver, channels: Sequence[str]) -> None:
        self.saver, self.channels = saver, list(channels)
        self.writes: dict[str, list[PendingWrite]] = {c: [] for c in self.channels}
        self.seeds: dict[str, Any] = {}
        self.remaining = set(self.channels)

    def target(self, found: CheckpointTuple | None) -> RunnableConfig | None:
        if found is None:
            return None
        self.saver._check_row(found)
        return found.parent_config

    def ancestor(self, found: CheckpointTuple | None) -> RunnableConfig | None:
        if found is None:
            return None
        self.saver._check_row(found)
        for write in reversed(found.pending_writes or ()):
            if write[1] in self.remaining:
                self.writes[write[1]].append(self.saver._opened(found, write))
        seeds = [ch for ch in self.remaining if ch in found.checkpoint["channel_values"]]
        if seeds:
            self.saver._check_values(found)
        for ch in seeds:
            self.seeds[ch] = found.checkpoint["channel_values"][ch]
            self.remaining.discard(ch)
        return found.parent_config if self.remaining else None

    def result(self) -> dict[str, DeltaChannelHistory]:
        result: dict[str, DeltaChannelHistory] = {}
        for ch in self.channels:
            result[ch] = {"writes": list(reversed(self.writes[ch]))}
            if ch in self.seeds:
                result[ch]["seed"] = self.seeds[ch]
        return result


def signed(saver: BaseCheckpointSaver[Any], key: StoreKey | None) -> BaseCheckpointSaver[Any]:
    """``saver`` signing with ``key``; ``saver`` itself without one."""
    return saver if key is None else SignedSaver(saver, key)


def unwrapped(saver: Any) -> Any:
    """The saver that stores the rows: ``saver`` itself unless it wraps another (it signs, or
    it is LangGraph's server's adapter around the graph's saver, made anew for each request)."""
    for _ in range(_MAX_WRAPS):
        inner = _wrapped(saver)
        if inner is None:
            return saver
        saver = inner
    return saver


def key_of(saver: object) -> StoreKey | None:
    """The key a saver signs with (None: unsigned), to build another saver like it."""
    for _ in range(_MAX_WRAPS):
        if isinstance(saver, SignedSaver):
            return saver.key
        inner = _wrapped(saver)
        if inner is None:
            return None
        saver = inner
    return None


_MAX_WRAPS = 8


def _wrapped(saver: Any) -> Any:
    """The saver ``saver`` wraps, or None. Read from the instance's own attributes: an adapter
    that forwards unknown attributes to its inner saver would answer for it otherwise."""
    if isinstance(saver, SignedSaver):
        return saver.inner
    inner = vars(saver).get("_inner") if hasattr(saver, "__dict__") else None
    return inner if isinstance(inner, BaseCheckpointSaver) else None
