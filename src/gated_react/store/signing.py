"""Signing a store that exists: threads written before the store key was set (``unsigned``), and
rows signed by an older key after a rotation, signed again with the first key, so that an older
key can be retired. A row that no key given verifies (edited, forged, or signed by a key not
given) is never signed over: the whole store is checked first, and if any thread holds such a
row, nothing is signed and those threads are named.

The rows are the checkpoints, their pending writes and the run records beside them (permits,
budgets a human extended, what was paid: ``rows.RECORDS``), a subgraph's records with its
thread's. A thread written without a key has its records signed by the key of the process that
wrote them, which no key given verifies: they are that thread's unsigned rows. In a thread
written with a key, a record no key verifies is refused like any other row.

Only tags change: a checkpoint's metadata gets its tag (and its values' digest), a pending write
its seal, a record its signature; no value is rewritten. Each thread is signed in one
transaction, each row only if it is still the row that was checked (a row changed meanwhile is
left as it is, and counted).
Runs may go on while a store is signed: rows written by a saver with the new key are signed
already; run it while savers still write without a key and their rows stay unsigned.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gated_react.errors import GatedReactError, exception_line, printable
from gated_react.store.damage import damaged, decoded, misshapen
from gated_react.store.key import (
    TAG,
    VALUES,
    StoreKey,
    header_digest,
    is_sealed,
    record_digest,
    row_signer,
    sealed_write,
    stored_metadata,
    unsealed,
    values_digest,
    where_of,
    write_signer,
)
from gated_react.store.rows import Dialect, RecordRow, dialect, owners
from gated_react.store.serializer import UnsafeCheckpoint
from gated_react.store.signed import key_of, unwrapped


class SigningError(GatedReactError):
    """The store cannot be signed as it is (no key, or a store that keeps nothing)."""


@dataclass
class Signing:
    """What signing a store found and did (or, on a dry run, would do)."""

    threads: int = 0
    current: int = 0
    """Rows signed by the first key already."""
    older: int = 0
    """Rows signed by an older key: signed again."""
    unsigned: int = 0
    """Rows written without a key: signed when unsigned threads are, else left."""
    unsigned_threads: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    """Threads holding a row no key given verifies, and why."""
    changed: list[str] = field(default_factory=list)
    """Threads whose rows changed while they were signed; sign again to finish them."""
    signed: int = 0
    """Rows signed by this run."""


@dataclass
class _Plan:
    """One thread: its rows to sign, and what it holds."""

    checkpoints: list[tuple[Any, dict[str, Any], str | None]] = field(default_factory=list)
    writes: list[tuple[tuple[Any, ...], tuple[str, bytes], tuple[str, bytes]]] = field(
        default_factory=list
    )
    records: list[tuple[int, str, str]] = field(default_factory=list)
    """Records to sign: seq, the signature they hold, the new one."""
    current: int = 0
    older: int = 0
    unsigned: int = 0
    refused: str | None = None


def sign_store(saver: Any, *, unsigned: bool = False, dry_run: bool = False) -> Signing:
    """Sign every row of ``saver``'s store with its key's first key (``saver`` as
    ``open_checkpointer(url, key=[new, old...])`` gives it). Threads written without a key are
    signed only with ``unsigned``. Nothing is signed when a thread holds a row no key verifies,
    or (without ``unsigned``) a thread was written without a key: see ``Signing.refused`` and
    ``Signing.unsigned_threads``."""
    key, raw = key_of(saver), unwrapped(saver)
    if key is None:
        raise SigningError("no store key: set GATED_REACT_STORE_KEY to the key to sign with")
    sql = dialect(raw)
    if sql is None:
        raise SigningError(f"a {type(raw).__name__} store keeps nothing to sign")
    report = Signing()
    for thread, parts in _threads(raw, sql).items():  # first the whole store is checked
        _count(report, thread, _plan(raw, sql, key, thread, parts))
    if dry_run or report.refused or (report.unsigned_threads and not unsigned):
        return report
    for thread, parts in _threads(raw, sql).items():
        plan = _plan(raw, sql, key, thread, parts)
        if plan.refused is not None:  # it changed into one since it was checked
            report.refused[thread] = plan.refused
        elif plan.older or (plan.unsigned and unsigned):
            _apply(raw, sql, thread, plan, report)
    return report


def _count(report: Signing, thread: str, plan: _Plan) -> None:
    report.threads += 1
    report.current += plan.current
    report.older += plan.older
    report.unsigned += plan.unsigned
    if plan.refused is not None:
        report.refused[thread] = plan.refused
    elif plan.unsigned:
        report.unsigned_threads.append(thread)


def _threads(raw: Any, sql: Dialect) -> dict[str, list[str]]:
    """The store's threads, each with the record threads it owns (its own, its subgraphs')."""
    found = owners(sql.threads(raw), sql.record_threads(raw))
    return {thread: found[thread] for thread in sorted(found)}


def _plan(
    raw: Any, sql: Dialect, key: StoreKey, thread: str, parts: Sequence[str] | None = None
) -> _Plan:
    """What signing ``thread`` takes: its checkpoints, pending writes and the records kept
    under ``parts`` (by default under the thread id itself)."""
    plan = _Plan()
    try:
        with decoded(thread):  # a row no reader decodes: refused too
            for found in raw.list({"configurable": {"thread_id": thread}}):
                _plan_checkpoint(plan, raw, key, found)
            for row in sql.writes(raw, thread) if plan.refused is None else ():
                _plan_write(plan, raw, key, thread, row)
    except UnsafeCheckpoint as exc:  # a value no reader revives: nothing to vouch for
        plan.refused = exception_line(exc)
    signed = bool(plan.current or plan.older)
    for part in (thread,) if parts is None else parts:
        for record in sql.records(raw, part) if plan.refused is None else ():
            _plan_record(plan, key, record, signed=signed)
    if plan.refused is None and plan.unsigned and (plan.current or plan.older):
        plan.refused = "it holds signed and unsigned rows: an unsigned row was added to it"
    return plan


def _plan_checkpoint(plan: _Plan, raw: Any, key: StoreKey, found: Any) -> None:
    if (why := misshapen(found)) is not None:  # a reader refuses it, signed or not
        raise damaged(where_of(found)[0], why)
    where, metadata = where_of(found), dict(found.metadata)
    checkpoint, tag = found.checkpoint, metadata.get(TAG)
    if checkpoint.get("id") != where[2]:  # a reader refuses it, signed or not
        plan.refused = plan.refused or f"checkpoint {printable(where[2])} holds another one"
        return
    digest = values_digest(raw.serde, checkpoint["channel_values"])
    if tag is None:
        plan.unsigned += 1
        header = header_digest(where, checkpoint, stored_metadata(metadata), digest)
        signed = {**metadata, TAG: key.sign(header), VALUES: digest.hex()}
        plan.checkpoints.append((where, signed, None))
        return
    signer = row_signer(key, where, checkpoint, metadata)
    if signer is None or not hmac.compare_digest(digest.hex(), str(metadata.get(VALUES))):
        plan.refused = (
            plan.refused or f"checkpoint {printable(where[2])} does not match its signature"
        )
        return
    if signer == 0:
        plan.current += 1
        return
    plan.older += 1
    header = header_digest(where, checkpoint, stored_metadata(metadata), digest)
    plan.checkpoints.append((where, {**metadata, TAG: key.sign(header)}, tag))


def _plan_write(plan: _Plan, raw: Any, key: StoreKey, thread: str, row: tuple[Any, ...]) -> None:
    ns, cid, task, idx, channel, stored = row
    value, where = raw.serde.loads_typed(stored), (thread, ns, cid)
    if not is_sealed(value):
        plan.unsigned += 1
        inner, index = value, idx
    else:
        signer = write_signer(key, raw.serde, where, task, channel=channel, sealed=value)
        if signer is None:
            why = f"a pending write to {printable(channel)!r} does not match its seal"
            plan.refused = plan.refused or why
            return
        if signer == 0:
            plan.current += 1
            return
        plan.older += 1
        inner, index = unsealed(raw.serde, value), value[1]
    resealed = sealed_write(key, raw.serde, where, task, idx=index, channel=channel, value=inner)
    sealed = raw.serde.dumps_typed(resealed)
    plan.writes.append(((thread, ns, cid, task, idx), stored, sealed))


def _plan_record(plan: _Plan, key: StoreKey, row: RecordRow, *, signed: bool) -> None:
    """A record: signed by the first key, by an older one, or by none given: the key of the
    process that wrote it when its thread was written without a key (``signed`` False), else
    an edited or forged record."""
    seq, thread, run, kind, what, body, at, mac = row
    digest = record_digest(thread, run, kind, what, body=body, at=at)
    signer = key.signer(digest, mac)
    if signer == 0:
        plan.current += 1
        return
    if signer is None and signed:
        said = f"{printable(kind)} record of run {printable(run)!r} does not match its signature"
        plan.refused = plan.refused or said
        return
    if signer is None:
        plan.unsigned += 1
    else:
        plan.older += 1
    plan.records.append((seq, mac, key.sign(digest)))


def _apply(raw: Any, sql: Dialect, thread: str, plan: _Plan, report: Signing) -> None:
    with sql.transaction(raw) as run:
        done = sum(run(sql.set_metadata, where, meta, old) for where, meta, old in plan.checkpoints)
        done += sum(run(sql.set_write, key, old, new) for key, old, new in plan.writes)
        done += sum(run(sql.set_record, seq, old, new) for seq, old, new in plan.records)
    report.signed += done
    if done < len(plan.checkpoints) + len(plan.writes) + len(plan.records):
        report.changed.append(thread)
