"""A listing's window in time: ages and moments as an operator writes them (``30d``, ``12h``,
``2026-11-30``), and the checkpoint ids that bound them.

LangGraph's checkpoint ids are UUIDv6: the first 60 bits are the time the checkpoint was made,
and the text of two ids sorts as their times do. So a thread's newest checkpoint id says when it
was last updated, and a window is two ids that one SQL query compares the newest ids with.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_GREGORIAN = datetime(1582, 10, 15, tzinfo=UTC)  # UUIDv1/v6 count 100 ns from here
_TICKS = 10_000_000  # per second
AGES = "an age such as 30d, 12h, 90m or 2w, or a date such as 2026-11-30 (UTC unless it says)"


def parse_age(text: str) -> timedelta:
    """``30d`` (s, m, h, d, w); a ValueError in one line for anything else."""
    found = _AGE.fullmatch(text.strip().lower())
    if found is None:
        raise ValueError(f"{text!r} is not an age: use {AGES}")
    try:
        return timedelta(seconds=float(found[1]) * _UNITS[found[2]])
    except OverflowError:  # past timedelta's 999,999,999 days
        raise ValueError(f"{text!r} is longer than any age: use {AGES}") from None


def parse_moment(text: str, now: datetime | None = None) -> datetime:
    """An age before ``now`` (``2d``: two days ago) or a date and time (ISO 8601)."""
    now = now or datetime.now(UTC)
    if _AGE.fullmatch(text.strip().lower()):
        try:
            return now - parse_age(text)
        except OverflowError:  # before the year 1
            raise ValueError(f"{text!r} reaches back before any date: use {AGES}") from None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is neither an age nor a date: use {AGES}") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def id_at(moment: datetime) -> str:
    """The smallest checkpoint id made at ``moment``: every id made then or later sorts after
    it, every one made before sorts before it."""
    ticks = max(0, int((moment - _GREGORIAN).total_seconds() * _TICKS))
    digits = f"{min(ticks, (1 << 60) - 1):015x}"
    return f"{digits[:8]}-{digits[8:12]}-6{digits[12:]}-0000-000000000000"


def id_time(checkpoint_id: str) -> datetime | None:
    """When a checkpoint id was made; None for an id that is not a UUIDv6."""
    try:
        value = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    if value.version != 6:
        return None
    ticks = (value.time_low << 28) | (value.time_mid << 12) | (value.time_hi_version & 0x0FFF)
    return _GREGORIAN + timedelta(microseconds=ticks // 10)


@dataclass(frozen=True, slots=True)
class Window:
    """Threads last updated at or after ``since`` and before ``before`` (None: no bound)."""

    since: datetime | None = None
    before: datetime | None = None

    def bounds(self) -> tuple[str | None, str | None]:
        """The window as checkpoint ids: the newest id of a thread in it is >= the first and
        < the second."""
        low = None if self.since is None else id_at(self.since)
        high = None if self.before is None else id_at(self.before)
        return low, high

    def holds(self, checkpoint_id: str) -> bool:
        low, high = self.bounds()
        return (low is None or checkpoint_id >= low) and (high is None or checkpoint_id < high)
