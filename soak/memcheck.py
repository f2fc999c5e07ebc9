"""Memory bounded by the clients: in every sample each policy's keys (``MEMORY USAGE``)
within its clients so far times the per-client figure of :mod:`ratelimits.tools.memory`,
made a bound; and once the site stopped, ``used_memory`` above the baseline within all
the clients times those figures, with the keyspace's entries, the bookkeeping keys and
what Redis keeps for itself."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any

from ratelimits.tools.memory import bytes_per_client
from soak.history import MemorySample
from soak.limits import highest_limit
from soak.verdict import EXAMPLES, Check, Result

#: The identity of the keys ratelimits.tools.memory measured.
MEASURED_IDENTITY = "ip:203.0.113.7"
#: What a key costs in used_memory beyond its MEMORY USAGE (which the per-client figures
#: are): its entries in the keyspace's two hash tables, keys and expiries. Measured:
#: FLUSHALL of 2,000 fixed_window keys gave back 56 B a key more than MEMORY USAGE said.
KEYSPACE_BYTES = 64
#: What a server may keep beyond its keys after a run of faults, whatever the clients:
#: measured 34 to 235 KB on a primary (restarted, promoted, or in a reshard: replication,
#: cluster bus and migration buffers, allocator state) against its baseline with every
#: connection closed, in runs of 40 and 200 s; twice the most seen. A leak that grows
#: with requests (MBs in a soak's tens of thousands) does not fit in it.
REDIS_OWN_BYTES = 512 * 1024


def memory(result: Result) -> list[Check]:
    rows = result.meta.policies
    firsts = first_requests(result)
    figure = {name: per_client(row, highest_limit(result, name)) for name, row in rows.items()}
    worst: dict[str, float] = dict.fromkeys(rows, 0.0)
    problems = []
    for sample in result.memory:
        for name, (keys, size) in sample.by_policy.items():
            if name not in rows:
                continue
            clients = clients_by(firsts[name], sample.at)
            bound = clients * figure[name]
            worst[name] = max(worst[name], size / bound if bound else math.inf)
            if size > bound:
                problems.append(
                    f"{name} at {sample.at - result.meta.started:.0f} s: {size:,} B in "
                    f"{keys} keys > {clients} clients x {figure[name]} B"
                )
    running = [s for s in result.memory if not s.final]
    peak = max(running, key=keys_total, default=None)
    result.figures["memory"] = {
        "figure": figure,
        "worst": worst,
        "peak_keys_bytes": keys_total(peak) if peak else 0,
        "peak_keys": sum(keys for keys, _ in peak.by_policy.values()) if peak else 0,
        "peak_above_baseline": max((s.above_baseline for s in running), default=0),
    }
    checks = [
        Check(
            "each policy's keys within clients x the per-client figure, in every sample",
            not problems,
            f"{len(result.memory)} samples; fullest: "
            + ", ".join(f"{name} {share:.0%}" for name, share in worst.items()),
            problems[:EXAMPLES],
        )
    ]
    final = next((s for s in result.memory if s.final), None)
    if final is None:
        checks.append(Check("used_memory within the bound", False, "no sample after the stop"))
        return checks
    clients = sum(len(found) for found in firsts.values())
    keys = sum(len(firsts[name]) * (figure[name] + KEYSPACE_BYTES) for name in rows)
    servers = len(final.nodes)
    bound = keys + final.bookkeeping + servers * REDIS_OWN_BYTES
    held_keys = keys_total(final) + KEYSPACE_BYTES * sum(n for n, _ in final.by_policy.values())
    result.figures["memory"].update(
        final_above=final.above_baseline,
        bound=bound,
        clients=clients,
        own=final.above_baseline - held_keys - final.bookkeeping,
        servers=servers,
    )
    checks.append(
        Check(
            "used_memory above the baseline within clients x the per-client figures",
            final.above_baseline <= bound,
            f"{final.above_baseline:,} B above the baseline once the site stopped, of which "
            f"the keys left {held_keys:,} B; bound {bound:,} B: {clients:,} clients over "
            f"{len(rows)} policies {keys:,} B (+{KEYSPACE_BYTES} B a key for the keyspace's "
            f"entries), bookkeeping keys {final.bookkeeping:,} B, and Redis's own "
            f"{REDIS_OWN_BYTES // 1024} KB on each of the {servers} primaries",
        )
    )
    return checks


def per_client(row: dict[str, Any], limit: int) -> int:
    """:func:`~ratelimits.tools.memory.bytes_per_client`, measured with an address as the
    identity and interpolated between measured limits, made a bound: plus what a longer
    identity adds to the key's name (a hashed header, ``h:`` and 32 hex digits: the
    allocator's 16-byte steps, and one more for a name that crosses into the next size),
    and one step of the allocator's size classes at that size (an interpolated size can
    fall inside a class, which the real allocation rounds up to)."""
    measured = bytes_per_client(row["algorithm"], limit)
    identity = "global" if row["key"] == "global" else "h:" + "0" * 32
    longer = len(identity) - len(MEASURED_IDENTITY)
    name = 16 * math.ceil(longer / 16) + 16 if longer > 0 else 0
    return measured + name + size_class_step(measured)


def size_class_step(size: int) -> int:
    """jemalloc's spacing between size classes around ``size``: a quarter of the power of
    two below it (16 B up to 128 B)."""
    return max(16, 2 ** (max(size, 1).bit_length() - 1) // 4)


def first_requests(result: Result) -> dict[str, list[float]]:
    """Per policy, when each of its clients first sent (sorted); the warm-up's client
    counts from the start."""
    firsts: dict[str, dict[str, float]] = {name: {} for name in result.meta.policies}
    for r in result.records:
        row = result.meta.policies[r.policy]
        who = "global" if row["key"] == "global" else r.client
        firsts[r.policy].setdefault(who, r.send)
    out = {}
    for name, found in firsts.items():
        if result.meta.policies[name]["key"] != "global":
            found.setdefault("warm-up", -math.inf)
        else:
            found["global"] = -math.inf
        out[name] = sorted(found.values())
    return out


def clients_by(firsts: Sequence[float], at: float) -> int:
    return bisect.bisect_right(firsts, at)


def keys_total(sample: MemorySample) -> int:
    return sum(size for _, size in sample.by_policy.values())
