"""The records a run leaves beside its checkpoints, and their signatures.

A record says one thing that happened, once: a run opened, a model call started or was paid, the
gate let a call through (a permit) or refused one the model is shown, a call that is not
idempotent started, a call ran for a while or finished, a human extended a budget, the run
ended. Each is bound to its thread and run and signed with HMAC-SHA256: with the store key when
the store has one, else with a key only this process holds (``process_key``). A record whose
signature does not verify never lets anything run (a permit must verify), but still holds a run
back (a ``started`` record of any signature means the call may have run; spend of any signature
counts)."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import Any

from gated_react.store.key import StoreKey, record_digest, record_text


class Kind(StrEnum):
    """What a record says happened."""

    OPENED = "opened"
    """A run opened; its body is what it runs under (``RunContext``)."""
    MODEL = "model"
    """A model call is about to be made (counted as a step, at its estimate, until paid)."""
    PAID = "paid"
    """A model call returned: its tokens, cost and seconds."""
    PERMIT = "permit"
    """The gate let a call through: exactly this tool with exactly these arguments."""
    REFUSED = "refused"
    """The gate refused a call and shows the model why (it counts as a call)."""
    STARTED = "started"
    """A call that is not idempotent was claimed to run (at most once per call key)."""
    RUNNING = "running"
    """A call is still running: how long it has taken so far (they count until its ``done``)."""
    DONE = "done"
    """A call finished: whether it worked, how long it took, what the model was shown."""
    EXTENDED = "extended"
    """A human extended a spent budget."""
    ASKED = "asked"
    """A human was asked about a call: every pass after asks again until answered, whatever a
    review's ``when`` says then."""
    ENDED = "ended"
    """The run ended: its stop reason and message."""


@dataclass(slots=True)  # not frozen: a frozen dataclass is made four times as slowly, and a
class Record:  # step makes a dozen; nothing changes one (``stored`` makes the ledger's copy)
    """One record. ``mac``, ``seq``, ``verified`` and ``text`` are the ledger's: its signature,
    the order it was stored in, whether its signature holds under the key the reader has, and
    its body as signed and stored."""

    thread: str
    """The thread (and graph namespace, for a graph run as a subgraph) it belongs to."""
    run: str
    """The run it belongs to: the id of the human message the run answers."""
    kind: Kind
    key: str
    """What it is about: a call's key, a model call's id, a budget, the run."""
    body: dict[str, Any] = field(default_factory=dict)
    """Plain JSON."""
    at: float = field(default_factory=time.time)
    mac: str = ""
    seq: int = 0
    verified: bool = False
    text: str = field(default="", compare=False, repr=False)
    """The body as JSON with sorted keys (``record_text``), once signed or read: what the
    signature covers, and what the database holds."""

    def digest(self, text: str | None = None) -> bytes:
        body = self.body if text is None else text
        return record_digest(self.thread, self.run, self.kind, self.key, body=body, at=self.at)

    def signed(self, key: StoreKey) -> Record:
        text = record_text(self.body)
        return self.stored(mac=key.sign(self.digest(text)), verified=True, text=text)

    def holds(self, key: StoreKey) -> bool:
        """Whether the signature holds: over the text as read (the body was read from it),
        else over the body's sorted JSON (a row stored with its keys in another order)."""
        if self.text and key.holds(self.digest(self.text), self.mac):
            return True
        return key.holds(self.digest(), self.mac)

    def stored(
        self, *, mac: str | None = None, seq: int | None = None, verified: bool | None = None,
        text: str | None = None,
    ) -> Record:  # fmt: skip
        """This record with the ledger's fields set (``dataclasses.replace`` walks every field
        in Python; a step stores five records)."""
        return Record(
            self.thread, self.run, self.kind, self.key, self.body, self.at,
            self.mac if mac is None else mac, self.seq if seq is None else seq,
            self.verified if verified is None else verified, self.text if text is None else text,
        )  # fmt: skip


@cache
def process_key() -> StoreKey:
    """The key records are signed with when the store has none: made when first needed and
    never stored, so no other process (and nothing written into the store) can forge one."""
    return StoreKey(secrets.token_bytes(32))
