"""A policy's script arguments as the bytes a decide call carries (RESP bulk strings).

Made once per policy (and per calendar period), so a request only picks its shard's
bytes, and appends its own cost when it spends another (:func:`encoded_cost`).
"""

from __future__ import annotations

import functools

from ratelimits.engine.policy.script_args import ScriptArgs
from ratelimits.engine.store.commands import bulk_strings

#: Per shard, its ARGV slots as bytes.
WireArgs = tuple[bytes, ...]


def wire(args: ScriptArgs) -> tuple[WireArgs, WireArgs]:
    """``args`` as a decide call carries them, per shard: all six slots, and the five
    before the cost (a request that spends another cost appends its own)."""
    return tuple(map(bulk_strings, args)), tuple(bulk_strings(a[:5]) for a in args)


@functools.lru_cache(maxsize=256)
def encoded_cost(cost: int) -> bytes:
    """The cost slot of a request that spends ``cost`` units, as a decide call carries it."""
    return bulk_strings([str(cost)])
