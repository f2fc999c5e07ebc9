"""Small helpers shared by the tests."""

from __future__ import annotations

from ratelimits import limiter
from ratelimits.decision import Decision, Verdict
from ratelimits.policy_table import CompiledPolicy

IDENTITY = "ip:203.0.113.7"


def policy(
    algorithm: str, limit: int, window: int, name: str = "p", **fields: object
) -> CompiledPolicy:
    return CompiledPolicy.build(
        name=name, endpoint="x", algorithm=algorithm, limit=limit, window=window, **fields
    )


def hit(p: CompiledPolicy, now: float, identity: str = IDENTITY) -> Decision:
    """One request at ``now`` (seconds) against one policy."""
    return limiter.decide([limiter.Check(p, identity)], now=now).decisions[0]


def hit_all(policies: list[CompiledPolicy], now: float, identity: str = IDENTITY) -> Verdict:
    return limiter.decide([limiter.Check(p, identity) for p in policies], now=now)
