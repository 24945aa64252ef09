"""A SQLite backend's own records since it last read a run's records, to read them back from
memory instead of the table while no one else has written to the database.

A run's records are read after each of its writes (``Ledger.book``: what was stored since the
last read), and on SQLite such a read (a query, its rows parsed and their signatures matched)
cost as much again as the write. SQLite has one writer at a time, numbers a table's rows in the
order they are committed, and changes ``PRAGMA data_version`` when another connection commits.
So once a run's records were read from the table, while the version holds, the rows stored for
it since are those this backend inserted (under the saver's lock, which every read and write
here holds): the records are kept here as inserted and a read from where the last one stopped
is answered with them, as the table would give them back (the body as its stored text reads;
``Ledger`` checks them as it checks any it reads).

Anything else clears them, and the next read goes to the table: another connection's commit
(another process, another saver on the file), a write to the table through the saver's
connection that is not the backend's (a thread deleted, the store re-signed or pruned:
``store.rows.changed_outside``), a thread forgotten, a write that failed or was interrupted
before its records were kept, a read from an earlier point than the last (a run's book made
again), or more records kept than ``KEPT``. A connection two backends use (two savers made on
one connection, or a saver LangGraph copied) keeps no tail at all (``Sharing``): neither
backend sees the other's inserts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from weakref import WeakValueDictionary

from gated_react._engine.authority.records import Record
from gated_react._engine.authority.statements import Plan
from gated_react.store.rows import outside_changes, record_body

VERSION = "PRAGMA data_version"
"""Changes when another connection has committed to the database since the last time asked."""
KEPT = 1024
"""Records (and runs) kept at most; past that, all are dropped and the next reads go to the
table."""

Place = tuple[str, str | None, int]
"""What a read asks for: the thread, the run (None: every run's), the last ``seq`` it has."""
_PLAIN = frozenset({str, int, float, bool, type(None)})


class Tail:
    """The records this backend committed since each run's last read from the table."""

    def __init__(self) -> None:
        self._version: int | None = None
        self._outside = outside_changes()
        self._from: dict[tuple[str, str | None], int] = {}
        """Per run read: every record of it after this ``seq`` is in ``_kept``."""
        self._kept: dict[tuple[str, str | None], list[Record]] = {}
        self._count = 0
        self._writing = False
        """A write went to the table and what it stored is not kept yet (an exception, even an
        interrupt, between its commit and ``saw`` leaves this set: nothing kept is trusted)."""

    def kept(self, plan: Plan[Any], version: int | None) -> list[Record] | None:
        """What ``plan`` reads, if it is a read of a run's records the tail holds (``version``:
        the database's ``data_version`` before it); None when it must go to the table."""
        if plan.place is None or version is None:
            return None
        return self.records(plan.place, version)

    @contextmanager
    def going(
        self, plan: Plan[Any], version: int | None
    ) -> Iterator[Callable[[list[list[Any]]], list[list[Any]]]]:
        """``plan`` on its way to the table: what its rows say is kept once they are handed to
        the function this yields (and handed back); one that fails, or is interrupted before,
        leaves nothing kept trusted."""
        if plan.write:
            if self._writing:  # an earlier write never said what it stored
                self.clear()
            self._writing = True

        def saw(rows: list[list[Any]]) -> list[list[Any]]:
            self.saw(plan, rows, version)
            return rows

        try:
            yield saw
        except BaseException:
            self.clear()
            raise

    def records(self, place: Place, version: int) -> list[Record] | None:
        """The records of ``place`` after its ``seq``, or None when only the table knows."""
        if self._writing:
            self.clear()
        thread, run, seq = place
        key = (thread, run)
        start = self._from.get(key)
        if start is None or seq < start or not self._holds(version):
            return None
        kept = self._kept.get(key, [])
        delivered = next((i for i, r in enumerate(kept) if r.seq > seq), len(kept))
        if delivered:  # the reader has them (it asks from after them): dropped only now
            del kept[:delivered]
            self._count -= delivered
        self._from[key] = seq
        return list(kept)

    def saw(self, plan: Plan[Any], rows: list[list[Any]], version: int | None) -> None:
        """What a plan that went to the table did (its rows, ``version`` taken before it)."""
        if plan.place is not None and version is not None:
            self._read(plan.place, version, rows[0])
        elif plan.name in ("insert", "claim"):
            # each step an insert whose rows are read (SQLite takes no lock statements)
            made = zip(plan.records, rows, strict=True)
            self._wrote([_as_read(record, found[0][0]) for record, found in made if found])
        elif plan.write and plan.name != "setup":  # a thread forgotten: its rows are gone
            self.clear()
        self._writing = False

    def clear(self) -> None:
        self._version = None
        self._from.clear()
        self._kept.clear()
        self._count = 0
        self._writing = False

    def _holds(self, version: int) -> bool:
        return version == self._version and self._outside == outside_changes()

    def _read(self, place: Place, version: int, found: list[Any]) -> None:
        """A read from the table, ``version`` taken before it: the run's records up to the last
        it gave are known, and every one of it this backend inserts from now on is kept."""
        if not self._holds(version):
            self.clear()
            self._version, self._outside = version, outside_changes()
        thread, run, seq = place
        last = found[-1][0] if found else seq
        key = (thread, run)
        self._from[key] = max(seq, int(last))  # first: what is still kept is at most that
        self._count -= len(self._kept.pop(key, ()))
        if len(self._from) > KEPT:
            self.clear()

    def _wrote(self, records: list[Record]) -> None:
        """Records this backend inserted and committed, in order."""
        for record in records:
            for key in ((record.thread, record.run), (record.thread, None)):
                if key in self._from:
                    self._kept.setdefault(key, []).append(record)
                    self._count += 1
        if self._count > KEPT:
            self.clear()


class Sharing:
    """Which backend uses a connection, and whether another one has too."""

    __slots__ = ("__weakref__", "owner", "shared")

    def __init__(self, owner: int) -> None:
        self.owner, self.shared = owner, False


_USERS: WeakValueDictionary[int, Sharing] = WeakValueDictionary()
"""By the id of each connection a backend uses (``sqlite3``'s take no weak reference): each
backend holds its connection's entry, so the entry lives as long as one of them, and while it
does the connection lives and its id is its own."""


def sharing(conn: Any, backend: object) -> Sharing:
    """``conn``'s entry, ``backend`` counted among its users."""
    found = _USERS.get(id(conn))
    if found is None:
        found = _USERS[id(conn)] = Sharing(id(backend))
    elif found.owner != id(backend):
        found.shared = True
    return found


def _as_read(record: Record, seq: int) -> Record:
    """A signed record inserted as ``seq``, as its row reads back: its body as its text parses
    (a copy when every value is a plain scalar: the appending caller keeps its own dict),
    unverified until ``Ledger`` checks it (it finds the record it signed)."""
    plain = all(type(value) in _PLAIN for value in record.body.values())
    body = dict(record.body) if plain else record_body(record.text)
    return Record(record.thread, record.run, record.kind, record.key, body, record.at,
                  record.mac, seq, False, record.text)  # fmt: skip
