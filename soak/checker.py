"""The checker: reads one topology's history (:func:`soak.verdict.load`) and says which
invariants held, each a :class:`~soak.verdict.Check`:

- no 5xx and no status but 200 and 429; every request answered but those a killed
  gunicorn worker was serving; every fault injected (here);
- no window over its limit, with the bound around failovers (:mod:`soak.limits`);
- Redis deciding again within 2 s of each fault's end (:mod:`soak.recovery`);
- concurrency slots all returned once the load stopped (here);
- memory bounded by the clients (:mod:`soak.memcheck`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from soak import limits, memcheck, recovery
from soak.history import FALLBACK, Record
from soak.recovery import AFTER, BEFORE
from soak.verdict import EDITS, EXAMPLES, Check, Result, active, kind_of, load

#: A worker kill resets the requests it was serving: those in flight within this slack.
RESET_SLACK = 0.5
#: Seconds after the load stopped at which no lease may be live.
GIVE_BACK = 1.0


def check(directory: Path) -> Result:
    """Every invariant of the run in ``directory``."""
    result = load(directory)
    if result.meta.error:
        result.checks.append(Check("the run", False, "it failed", [result.meta.error]))
        return result
    result.figures = figures(result)
    result.checks += [
        statuses(result),
        unanswered(result),
        injected(result),
        *limits.admitted(result),
        *recovery.recovered(result),
        leases(result),
        *memcheck.memory(result),
    ]
    return result


def figures(result: Result) -> dict[str, Any]:
    records = result.records
    seconds = max(result.meta.stopped - result.meta.started, 1e-9)
    kinds = Counter(kind_of(r) for r in records)
    latencies = sorted(r.recv - r.send for r in records if r.status)
    return {
        "requests": len(records),
        "seconds": seconds,
        "rate": len(records) / seconds,
        "kinds": dict(kinds),
        "p50_ms": 1000 * statistics.median(latencies) if latencies else 0.0,
        "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))] if latencies else 0.0,
        "max_ms": 1000 * latencies[-1] if latencies else 0.0,
        "clients": len({r.client for r in records}),
        "outside_faults": fallbacks_outside_faults(result),
    }


def fallbacks_outside_faults(result: Result) -> int:
    spans = [
        (f.start - BEFORE, f.end + AFTER) for f in active(result.faults) if f.kind not in EDITS
    ]
    return sum(
        1
        for r in result.records
        if r.decided == FALLBACK and r.status and not any(a <= r.send <= b for a, b in spans)
    )


def statuses(result: Result) -> Check:
    bad = [r for r in result.records if r.status >= 500 or r.status not in (0, 200, 429)]
    problems = [f"{r.status} {r.server} {r.path} at {r.send:.3f}: {r.detail}" for r in bad]
    fives = sum(1 for r in bad if r.status >= 500)
    return Check(
        "no 5xx (every answer 200 or 429)",
        not bad,
        f"{fives} 5xx, {len(bad) - fives} other statuses in {len(result.records):,} requests",
        problems[:EXAMPLES],
    )


def unanswered(result: Result) -> Check:
    kills = [f.start for f in active(result.faults) if f.kind == "worker"]
    lost = [r for r in result.records if r.status == 0]

    def explained(r: Record) -> bool:
        return r.server == "gunicorn" and any(
            r.send - RESET_SLACK <= at <= r.recv + RESET_SLACK for at in kills
        )

    odd = [r for r in lost if not explained(r)]
    return Check(
        "every request answered (but those a killed worker was serving)",
        not odd,
        f"{len(lost)} unanswered, {len(lost) - len(odd)} of them in flight at a worker kill",
        [f"{r.server} {r.path} at {r.send:.3f}: {r.detail}" for r in odd[:EXAMPLES]],
    )


def injected(result: Result) -> Check:
    failed = [f for f in result.faults if f.error]
    skipped = [f for f in result.faults if f.skipped]
    return Check(
        "every fault injected",
        not failed,
        f"{len(active(result.faults))} injected, {len(skipped)} skipped for lack of time",
        [f"{f.kind}: {f.error.splitlines()[0]}" for f in failed],
    )


def leases(result: Result) -> Check:
    looks = result.leases
    if not looks:
        return Check("concurrency slots all returned", False, "the leases were never read")
    stopped = result.meta.stopped
    settled = next((look for look in looks if look.at >= stopped + GIVE_BACK), looks[-1])
    spans = [(f.start - 1.0, f.end + AFTER) for f in active(result.faults) if f.kind not in EDITS]
    unexplained = [at for at in settled.live if not any(a <= at <= b for a, b in spans)]
    left = looks[-1].keys
    text = (
        f"{len(settled.live)} live leases {settled.at - stopped:.1f} s after the load stopped "
        f"({len(settled.live) - len(unexplained)} of requests a fault cut off); "
        f"lease keys left {looks[-1].at - stopped:.1f} s after: {left}"
    )
    problems = [f"a lease from {at:.3f} still held, no fault near it" for at in unexplained]
    if left:
        problems.append(f"{left} lease keys still stored {looks[-1].at - stopped:.1f} s after")
    return Check("concurrency slots all returned", not problems, text, problems[:EXAMPLES])
