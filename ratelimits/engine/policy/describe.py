"""A policy's rate in words, as the admin and the command show it."""

from __future__ import annotations

from typing import Protocol

import ratelimits.engine.algorithms as algorithms
from ratelimits.engine.policy.rules import SIGN_IN_FAILURES, calendar_zone


class Rated(Protocol):
    """What a rate is worded from: a :class:`~.spec.PolicySpec`, a compiled policy or a
    ``Policy`` row."""

    limit: int
    window: int
    algorithm: str
    burst: int | None
    cost: int
    counts: str
    calendar: str
    time_zone: str
    lockout: int


def describe_rate(rated: Rated) -> str:
    """``"5 per 60 s"``, or for concurrency (units released) ``"2 at once, lease 60 s"``,
    or for a calendar window ``"10,000 per calendar month (Europe/Berlin)"`` (a blank zone:
    ``settings.TIME_ZONE``); a token bucket's burst, a cost other than 1, counts other
    than all and a lockout are added (``"2 per 2 s, burst 4, cost 3"``, ``"5 per 60 s,
    failures only, then locked out 15 min"``)."""
    limit, window, algorithm = rated.limit, rated.window, rated.algorithm
    calendar, counts, lockout = rated.calendar or "", rated.counts or "all", rated.lockout or 0
    burst, cost = rated.burst, rated.cost or 1
    time_zone = calendar and calendar_zone(rated.time_zone)
    if algorithms.released(algorithm):
        text = f"{limit} at once, lease {window} s"
    elif calendar:
        text = f"{limit:,} per calendar {calendar}"
        if time_zone:
            text += f" ({time_zone})"
    else:
        text = f"{limit} per {window} s"
    if algorithms.bursts(algorithm) and burst is not None:
        text += f", burst {burst}"
    if cost != 1:
        text += f", cost {cost}"
    if counts == SIGN_IN_FAILURES:
        text += ", failed sign-ins only"
    elif counts != "all":
        text += f", {counts} only"
    if getattr(rated, "lockout_until_lifted", False):
        text += ", then locked out until lifted"
    elif lockout:
        text += f", then locked out {describe_duration(lockout)}"
        if getattr(rated, "extend_lockout", False):
            text += ", extended by every attempt"
    return text


def describe_duration(seconds: int) -> str:
    """``"15 min"``, ``"2 h"``, ``"1 day"``, or ``"90 s"`` when no larger unit divides it."""
    for size, unit in ((86400, "day"), (3600, "h"), (60, "min")):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}" + ("s" if unit == "day" and count > 1 else "")
    return f"{seconds} s"
