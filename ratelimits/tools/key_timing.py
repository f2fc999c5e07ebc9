"""When what holds a client back ends: its lockout, and a calendar policy's period.

A lockout's key (``lua/decide.lua``; :data:`ratelimits.engine.keys.names.LOCK_SUFFIX`) holds
when the lockout ends, in microseconds on the Redis clock, and expires then: read it
with ``GET`` and the server's ``TIME`` (:func:`lockout_from`). A calendar policy's counts
reset at the start of its next period, a local midnight of its time zone
(:func:`next_reset`). Both are told against the Redis clock, the one the limiter uses.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ratelimits.engine.policy import periods
from ratelimits.engine.policy.compiled import CompiledPolicy


@dataclass(frozen=True, slots=True)
class Lockout:
    """A client locked out until ``until_us``, as seen at ``now_us`` (microseconds)."""

    until_us: int
    now_us: int

    @property
    def left(self) -> float:
        """Seconds until the lockout ends."""
        return max(0, self.until_us - self.now_us) / 1_000_000

    @property
    def until(self) -> dt.datetime:
        """When the lockout ends, in UTC."""
        return dt.datetime.fromtimestamp(self.until_us / 1_000_000, tz=dt.UTC)


def lockout_from(value: bytes | str | None, now_us: int) -> Lockout | None:
    """The lockout a lock key's value (``GET``) holds at ``now_us``; ``None`` when there is
    none: no key, a lockout already over, or a value that is not a time."""
    if value is None:
        return None
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    try:
        until_us = int(text)
    except ValueError:
        return None
    return Lockout(until_us, now_us) if until_us > now_us else None


@dataclass(frozen=True, slots=True)
class NextReset:
    """The start of a calendar policy's next period: ``at_us`` (microseconds since the
    epoch) in ``time_zone``, ``left`` seconds after the instant it was asked for."""

    at_us: int
    time_zone: str
    left: float

    @property
    def local(self) -> dt.datetime:
        """The boundary as a local time of :attr:`time_zone` (midnight)."""
        return dt.datetime.fromtimestamp(self.at_us / 1_000_000, tz=periods.zone(self.time_zone))

    @property
    def local_text(self) -> str:
        """``2026-12-01 00:00 CET (Europe/Berlin)``."""
        return f"{self.local:%Y-%m-%d %H:%M %Z} ({self.time_zone})"


def next_reset(policy: CompiledPolicy, now_us: int) -> NextReset | None:
    """When ``policy``'s counts next reset after ``now_us``, for a calendar policy (the end
    of the period holding ``now_us``); ``None`` for a rolling window."""
    if not policy.calendar:
        return None
    zone = periods.zone(policy.time_zone)
    _, end_ms, _ = periods.boundaries(policy.calendar, zone, now_us / 1_000_000)
    at_us = end_ms * 1000
    return NextReset(at_us, policy.time_zone, max(0, at_us - now_us) / 1_000_000)


def period_of(policy: CompiledPolicy, at_us: int) -> tuple[int, int]:
    """The start and end, in microseconds, of ``policy``'s calendar period holding
    ``at_us``."""
    zone = periods.zone(policy.time_zone)
    start_ms, end_ms, _ = periods.boundaries(policy.calendar, zone, at_us / 1_000_000)
    return start_ms * 1000, end_ms * 1000
