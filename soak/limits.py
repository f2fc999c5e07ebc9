"""No window over its limit: each policy's admissions that Redis decided, per client and
per stretch between wipes, counted by :mod:`soak.admission` against the limit as it was.

Only a response that names its policy in ``RateLimit-Policy`` was decided by Redis (a
fail-open admission is the fail mode, not a count). A server that came back empty
(``Fault.wipe``) starts counting again, so windows are checked on each side of it apart
and an admission across it is left out. Around a Sentinel failover the bound is the limit
plus the admissions that may have been written where the failover throws them away
(``Fault.lost``): those are left out of the judged count, and the everything-counted
tally shows how far the full count went. A limit edit's old limit stays possible until
:data:`STALE` seconds after the edit's end.
"""

from __future__ import annotations

import bisect
import datetime
import functools
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any
from zoneinfo import ZoneInfo

from soak import admission, mix
from soak.admission import Interval, Tally
from soak.history import Fault, Record
from soak.verdict import EDITS, Admissions, Check, Result, active

STALE = 3.0


class Limits:
    """A policy's limit over time: its first value, then each edit's. An edit may take
    effect anywhere from its start until :data:`STALE` seconds after its end."""

    def __init__(self, first: int, edits: Sequence[Fault], policy: str) -> None:
        self.spans: list[tuple[float, float, int]] = []
        value, since = first, -math.inf
        for edit in sorted(edits, key=lambda e: e.start):
            if policy in edit.limits:
                self.spans.append((since, edit.end + STALE, value))
                value, since = edit.limits[policy], edit.start
        self.spans.append((since, math.inf, value))

    def within(self, a: float, b: float) -> tuple[int, int]:
        """The least and the most the limit may have been in ``[a, b]``."""
        found = [value for start, end, value in self.spans if start <= b and end >= a]
        return min(found), max(found)

    def most(self, a: float, b: float) -> int:
        return self.within(a, b)[1]

    @property
    def highest(self) -> int:
        return max(value for _, _, value in self.spans)


def rolling(window: float) -> Any:
    def period(at: float) -> Interval:
        index = math.floor(at / window)
        return index * window, (index + 1) * window

    return period


def calendar_month(zone_name: str) -> Any:
    zone = ZoneInfo(zone_name)

    @functools.lru_cache(maxsize=16)
    def month(year: int, number: int) -> Interval:
        start = datetime.datetime(year, number, 1, tzinfo=zone)
        following = datetime.datetime(year + number // 12, number % 12 + 1, 1, tzinfo=zone)
        return start.timestamp(), following.timestamp()

    def period(at: float) -> Interval:
        local = datetime.datetime.fromtimestamp(at, zone)
        return month(local.year, local.month)

    return period


def overlaps(record: Record, spans: Sequence[Interval]) -> bool:
    return any(record.send <= b and record.recv >= a for a, b in spans)


def admitted(result: Result) -> list[Check]:
    faults = active(result.faults)
    wipes = sorted((f.start, f.end) for f in faults if f.wipe)
    lost = [f.lost for f in faults if f.lost is not None]
    edits = [f for f in faults if f.kind in EDITS]
    checks = []
    for name, row in result.meta.policies.items():
        limits = Limits(int(row["limit"]), edits, name)
        judged: dict[tuple[str, int], list[Interval]] = defaultdict(list)
        everything: dict[tuple[str, int], list[Interval]] = defaultdict(list)
        count = uncertain = across = 0
        for r in result.records:
            if r.policy != name or not r.admitted or not r.by_redis:
                continue
            count += 1
            if overlaps(r, wipes):
                across += 1
                continue
            who = "global" if row["key"] == "global" else r.client
            segment = bisect.bisect_right([end for _, end in wipes], r.send)
            everything[who, segment].append((r.send, r.recv))
            if overlaps(r, lost):
                uncertain += 1
            else:
                judged[who, segment].append((r.send, r.recv))
        found = Admissions(
            name,
            row["algorithm"],
            mix.BY_POLICY[name].face,
            tally(row, limits, judged),
            tally(row, limits, everything),
            count,
            uncertain,
            across,
        )
        result.admissions.append(found)
        checks.append(admission_check(found, row))
    return checks


def tally(
    row: dict[str, Any], limits: Limits, groups: dict[tuple[str, int], list[Interval]]
) -> Tally:
    found = Tally()
    window = float(row["window"])
    algorithm = row["algorithm"]
    for (who, segment), intervals in sorted(groups.items()):
        intervals.sort()
        label = f"{who} (segment {segment})"
        if algorithm in ("sliding_log", "compact_log"):
            admission.sliding(intervals, window, limits.most, found, label)
        elif algorithm in ("fixed_window", "sliding_counter"):
            zone = row.get("time_zone")
            period = calendar_month(zone) if row.get("calendar") == "month" else rolling(window)
            admission.aligned(intervals, period, limits.most, found, label)
        elif algorithm == "token_bucket":
            burst = int(row.get("burst") or limits.highest)
            admission.gcra(intervals, window, limits.within, burst, found, label)
        elif algorithm == "concurrency":
            hold = float(row["hold"])  # the view's time: at least this long in progress
            admission.concurrent(intervals, hold, limits.most, found, label)
    return found


def admission_check(found: Admissions, row: dict[str, Any]) -> Check:
    judged, everything = found.judged, found.everything
    text = (
        f"{found.admitted:,} admitted by Redis; {judged.windows:,} windows, fullest "
        f"{judged.peak} of {judged.peak_bound}"
    )
    if found.uncertain:
        extra = max(0.0, everything.worst)
        text += (
            f"; {found.uncertain} admitted during a failover's switch: with them the "
            f"worst window was {extra:+g} over its limit (bound: +{found.uncertain})"
        )
    if found.across_wipe:
        text += f"; {found.across_wipe} across a wipe, left out"
    name = f"{found.policy} ({found.algorithm}, {found.face}) within its limit"
    return Check(name, judged.held, text, judged.over)


def highest_limit(result: Result, name: str) -> int:
    edits = [f for f in active(result.faults) if f.kind in EDITS]
    return Limits(int(result.meta.policies[name]["limit"]), edits, name).highest
