"""A policy's ARGV slots in ``lua/decide.lua``: per shard, six strings (algorithm, the
shard's share of the limit, the window slot (:func:`window_slot`), enforce, the shard's
share of the burst, cost), and the same as the bytes a decide call carries (:func:`wire`).

The bytes are made once per policy (and per calendar period), so a request only picks its
shard's, and appends its own cost when it spends another (:func:`encoded_cost`).
"""

from __future__ import annotations

import functools
import math

import ratelimits.engine.algorithms as algorithms
from ratelimits.engine.policy.periods import boundaries, zone
from ratelimits.engine.store.commands import bulk_strings

#: Script arguments: per shard, the six ARGV slots of ``lua/decide.lua``.
ScriptArgs = tuple[tuple[str, str, str, str, str, str], ...]
#: Per shard, its ARGV slots as bytes (RESP bulk strings).
WireArgs = tuple[bytes, ...]


def window_slot(
    calendar: str, time_zone: str, window: int, lockout: int, now: float, extend: bool = False
) -> tuple[str, float]:
    """The window slot of ``lua/decide.lua`` (see ``window_of`` in ``lua/prelude.lua``)
    at ``now``, and until when it holds (seconds since the epoch): ``"<window_ms>"``
    (for ever), or a calendar period's boundaries ``"<start_ms>,<end_ms>,<next_end_ms>"``
    (until the period's end); with ``"+<lockout_ms>"`` for a lockout, ``"+<lockout_ms>e"``
    for one that every attempt during it starts again (``extend``)."""
    if calendar:
        start, end, after = boundaries(calendar, zone(time_zone), now)
        slot, valid_until = f"{start},{end},{after}", end / 1000
    else:
        slot, valid_until = str(window * 1000), math.inf
    if not lockout:
        return slot, valid_until
    return f"{slot}+{lockout * 1000}{'e' if extend else ''}", valid_until


def shard_args(
    algorithm: str,
    limit: int,
    window_ms: str,
    enforce: str,
    burst: int | None,
    cost: int,
    shards: int,
) -> ScriptArgs:
    """Each shard's ARGV slots (see ``CompiledPolicy.script_args``).

    A policy has at most ``limit`` shards (each has a unit of quota), and an algorithm with
    bursts at most ``burst`` (each shard's bucket holds a unit). A bucket's shards split the rate
    and the burst as :func:`shard_limits` splits a limit: shard i admits at most
    ``burst_i + limit_i * t / window`` units in any time t, so the policy, summed over its
    shards, admits at most ``burst + limit * t / window`` (as an unsharded bucket does),
    and, as for every sharded policy, a client whose requests all land in one shard may
    be denied earlier."""
    bursts = limit if burst is None else burst
    count = max(1, min(shards, limit, bursts if algorithms.bursts(algorithm) else limit))
    cost_slot = str(cost)
    return tuple(
        (algorithm, str(share), window_ms, enforce, str(bucket), cost_slot)
        for share, bucket in zip(
            shard_limits(limit, count), shard_limits(bursts, count), strict=True
        )
    )


def shard_limits(limit: int, shards: int) -> list[int]:
    """``limit`` split over ``shards`` as evenly as whole numbers allow (they sum to it)."""
    share, extra = divmod(limit, shards)
    return [share + (1 if i < extra else 0) for i in range(shards)]


def wire(args: ScriptArgs) -> tuple[WireArgs, WireArgs]:
    """``args`` as a decide call carries them, per shard: all six slots, and the five
    before the cost (a request that spends another cost appends its own)."""
    return tuple(map(bulk_strings, args)), tuple(bulk_strings(a[:5]) for a in args)


@functools.lru_cache(maxsize=256)
def encoded_cost(cost: int) -> bytes:
    """The cost slot of a request that spends ``cost`` units, as a decide call carries it."""
    return bulk_strings([str(cost)])
