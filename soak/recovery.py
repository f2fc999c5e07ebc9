"""Recovery: Redis deciding again within :data:`RECOVERY` seconds of each fault's end (a
second of answers from then on, none in the fail mode), and, after a limit edit, no
request decided by the old limit later than that."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from soak.history import FALLBACK, Fault, Record
from soak.verdict import EDITS, Check, Recovery, Result, active

RECOVERY = 2.0
#: Recovered: this many seconds of answers, at least :data:`QUORUM` of them, none in the
#: fail mode; looked for up to :data:`HORIZON` seconds after the fault's end.
CALM = 1.0
QUORUM = 3
HORIZON = 30.0
#: Seconds around a fault in which the fail mode (and a lost give-back) is its doing.
BEFORE, AFTER = 0.5, RECOVERY


def recovered(result: Result) -> list[Check]:
    records = result.records
    sends = [r.send for r in records]
    checks = []
    for fault in active(result.faults):
        if fault.kind in EDITS:
            recovery = edit_recovery(result, fault)
            late = recovery.stale is not None and recovery.stale > RECOVERY
            text = f"old limit last used {recovery.stale or 0:.2f} s after the edit"
            checks.append(Check(f"{fault.kind} at {offset(result, fault):.0f} s", not late, text))
        else:
            recovery = fault_recovery(records, sends, fault)
            late = recovery.decided is None or recovery.decided > RECOVERY
            decided = "never" if recovery.decided is None else f"{recovery.decided:.2f} s"
            text = (
                f"Redis deciding again {decided} after its end; "
                f"{recovery.fallbacks} fail-mode answers"
            )
            name = f"{fault.kind} at {offset(result, fault):.0f} s: recovered"
            checks.append(Check(name, not late, text))
        result.recoveries.append(recovery)
    return checks


def offset(result: Result, fault: Fault) -> float:
    return fault.start - result.meta.started


def fault_recovery(records: Sequence[Record], sends: Sequence[float], fault: Fault) -> Recovery:
    end = fault.end
    first = bisect.bisect_left(sends, end)
    last = bisect.bisect_right(sends, end + HORIZON)
    decided = None
    for at in [end, *sends[first:last]]:
        lo, hi = bisect.bisect_left(sends, at), bisect.bisect_right(sends, at + CALM)
        answered = [r for r in records[lo:hi] if r.status]
        if len(answered) >= QUORUM and all(r.by_redis for r in answered):
            decided = at - end
            break
    denied = next(
        (r.send - end for r in records[first:last] if r.status == 429 and r.by_redis), None
    )
    lo, hi = (
        bisect.bisect_left(sends, fault.start - BEFORE),
        bisect.bisect_right(sends, end + AFTER),
    )
    fallbacks = sum(1 for r in records[lo:hi] if r.decided == FALLBACK and r.status)
    return Recovery(fault, decided, denied, fallbacks)


def edit_recovery(result: Result, fault: Fault) -> Recovery:
    """How long after ``fault`` (a limit edit) a request was still decided by the limit
    before it, until the next edit."""
    before = previous_limits(result, fault)
    later = [f.start for f in active(result.faults) if f.kind in EDITS and f.start > fault.start]
    until = min(later, default=math.inf)
    changed = {name for name, limit in fault.limits.items() if limit != before[name]}
    stale = 0.0
    for r in result.records:
        in_time = fault.end <= r.send < until and r.by_redis
        if in_time and r.policy in changed and r.limit == before[r.policy]:
            stale = max(stale, r.send - fault.end)
    return Recovery(fault, None, None, 0, stale)


def previous_limits(result: Result, fault: Fault) -> dict[str, int]:
    limits = {name: int(row["limit"]) for name, row in result.meta.policies.items()}
    for other in sorted(active(result.faults), key=lambda f: f.start):
        if other is fault:
            break
        limits.update(other.limits)
    return limits
