"""Calendar windows: the local day, week or month a count belongs to, as instants.

A policy with ``calendar`` set counts in calendar periods of its time zone instead of a
rolling window: a day from midnight, a week from Monday's midnight, a month from the
1st's. Redis knows no time zones, so the worker sends the boundaries:
:func:`boundaries` gives the start of the period holding an instant, its end and the
next period's end, in milliseconds since the epoch, and ``lua/prelude.lua`` (``period_of``)
finds the period of the Redis clock among them. Boundaries are local midnights turned
into instants by the zone's rules, so a day is 23 or 25 hours long across a DST change,
and a midnight that a change skips starts its day at the first instant that exists.
"""

from __future__ import annotations

import datetime as dt
import functools
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: What ``Policy.calendar`` may be besides ``""`` (a rolling window).
CALENDARS = ("day", "week", "month")

#: The ``window`` a calendar policy keeps, in seconds: what the docs, headers
#: (``RateLimit-Policy``'s ``w``) and memory estimates read. The period itself is the
#: calendar's, of whatever length its days have.
NOMINAL_WINDOW = {"day": 24 * 3600, "week": 7 * 24 * 3600, "month": 30 * 24 * 3600}


class UnknownTimeZone(ValueError):
    """A time zone name that is not in the IANA database this machine has."""


@functools.lru_cache(maxsize=64)
def zone(name: str) -> ZoneInfo:
    """The time zone called ``name`` (an IANA name such as ``Europe/Berlin``); raises
    :class:`UnknownTimeZone` for a name the machine's database does not know."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise UnknownTimeZone(
            f"{name!r} is not a known time zone: use an IANA name such as Europe/Berlin, "
            "America/New_York or UTC."
        ) from error


def boundaries(calendar: str, time_zone: ZoneInfo, now: float) -> tuple[int, int, int]:
    """The period of ``calendar`` in ``time_zone`` holding ``now`` (seconds since the
    epoch): its start, its end and the next period's end, in milliseconds since the epoch."""
    today = dt.datetime.fromtimestamp(now, time_zone).date()
    start = period_start(calendar, today)
    following = next_start(calendar, start)
    after = next_start(calendar, following)
    return (
        _instant_ms(start, time_zone),
        _instant_ms(following, time_zone),
        _instant_ms(after, time_zone),
    )


def period_start(calendar: str, day: dt.date) -> dt.date:
    """The first day of the period of ``calendar`` that holds ``day``."""
    if calendar == "day":
        return day
    if calendar == "week":
        return day - dt.timedelta(days=day.weekday())
    if calendar == "month":
        return day.replace(day=1)
    raise ValueError(f"calendar must be one of {', '.join(CALENDARS)}, not {calendar!r}")


def next_start(calendar: str, start: dt.date) -> dt.date:
    """The first day of the period after the one that starts on ``start``."""
    if calendar == "day":
        return start + dt.timedelta(days=1)
    if calendar == "week":
        return start + dt.timedelta(days=7)
    if calendar == "month":
        return dt.date(start.year + start.month // 12, start.month % 12 + 1, 1)
    raise ValueError(f"calendar must be one of {', '.join(CALENDARS)}, not {calendar!r}")


def _instant_ms(day: dt.date, time_zone: ZoneInfo) -> int:
    """Midnight starting ``day`` in ``time_zone``, in milliseconds since the epoch. A
    midnight that a change skips is read with the offset before it (``fold=0``): the
    instant the clocks jumped, the first that exists of that day. An ambiguous one is
    its first occurrence."""
    midnight = dt.datetime.combine(day, dt.time(), tzinfo=time_zone)
    return round(midnight.timestamp() * 1000)
