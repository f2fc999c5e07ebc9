"""What a request's own client has used of each policy that counts it, read without
spending: the numbers of ``GET /ratelimits/usage/`` (:mod:`ratelimits.usage`).

:func:`usage_of` lists every enforced policy whose key gives the request an identity
(``user``, ``ip``, ``user_or_ip``, ``anon`` when the request has no user, and
``header:<Name>`` when the request carries the header), with the client's own override
applied. Global and shadow policies are left out, and so is a policy an override
exempts the client from; a client from ``EXEMPT_NETWORKS`` is under none. Every shard of
every such policy is read in one ``decide`` call with recording off (one call per hash
slot on a cluster), so nothing is spent and no other client's key is read. A policy with
a lockout is read twice in that call, with and without its lock, to tell whether the lock
is what keeps the client out.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ratelimits.engine.decision import Decision
from ratelimits.engine.keys.kinds import describe
from ratelimits.engine.limiter import decide
from ratelimits.engine.policy import periods
from ratelimits.engine.policy.compiled import Check, CompiledPolicy
from ratelimits.engine.table.current import get_table
from ratelimits.exceptions import RedisUnavailable
from ratelimits.http import request_facts


@dataclass(frozen=True, slots=True)
class PolicyUsage:
    """One policy as it applies to the client, and what the client has used of it.

    ``limit``, ``used`` and ``remaining`` are in units (a request spends the policy's
    ``cost``), summed over the shards of a sharded policy. ``reset`` is the seconds until
    one more unit frees up (a calendar period's: until its next boundary);
    ``retry_after`` the seconds until a request of one unit would be admitted, 0 when one
    would be now. ``locked_out`` is true while the policy's lockout keeps the client out
    longer than its count alone would."""

    policy: CompiledPolicy
    identity: str
    used: int
    remaining: int
    reset: int
    retry_after: int
    locked_out: bool
    #: When ``reset`` ends, on the web server's clock: in the policy's zone for a
    #: calendar period, else in UTC.
    resets_at: dt.datetime

    def as_json(self) -> dict[str, Any]:
        """The entry of ``{"policies": [...]}`` (see docs/usage.md)."""
        policy = self.policy
        return {
            "name": policy.name,
            "endpoint": policy.endpoint,
            "methods": sorted(policy.methods),
            "limit": policy.limit,
            "remaining": self.remaining,
            "used": self.used,
            "reset": self.reset,
            "resets_at": self.resets_at.isoformat(timespec="seconds"),
            "retry_after": self.retry_after,
            "window": policy.window,
            "calendar": policy.calendar,
            "time_zone": policy.time_zone,
            "lockout": policy.lockout,
            "lockout_until_lifted": policy.lockout_until_lifted,
            "locked_out": self.locked_out,
            "key": policy.key,
            "counted_as": describe(self.identity),
            "algorithm": policy.algorithm,
            "counts": policy.counts,
            "cost": policy.cost,
        }


def usage_of(request: Any) -> list[PolicyUsage]:
    """The client's usage of each policy that counts ``request`` (in the policies' name
    order); raises :class:`~ratelimits.exceptions.RedisUnavailable` when Redis cannot
    answer (or its circuit breaker is open)."""
    policies = [p for p in get_table().policies if p.enforce and not p.kind.shared]
    picked = request_facts.checks_for(request, policies, _identity_if_counted)
    checks: list[Check] = []
    for check in picked:
        policy = check.policy
        checks.extend(Check(policy, check.identity, shard, 1) for shard in range(policy.shards))
        if policy.lock_seconds:
            checks.append(Check(_without_lockout(policy), check.identity, 0, 1))
    if not checks:
        return []
    decisions = decide(checks, record=False).decisions
    if any(decision.failed for decision in decisions):
        raise RedisUnavailable("Redis could not answer for the usage of the client's policies.")
    now = time.time()
    found = iter(decisions)
    return [_usage(check, _take(found, check.policy), now) for check in picked]


def _identity_if_counted(request: Any, policy: CompiledPolicy) -> str | None:
    """Who ``request`` counts as under ``policy``; ``None`` for a header policy whose
    header the request does not carry (its requests without it count by address)."""
    if policy.header_meta_key is not None and not request.META.get(policy.header_meta_key):
        return None
    return request_facts.policy_identity(request, policy)


def _take(found: Iterator[Decision], policy: CompiledPolicy) -> list[Decision]:
    """The decisions of ``policy``'s checks, in the order :func:`usage_of` made them:
    one per shard, then the lock-free one of a lockout."""
    return [next(found) for _ in range(policy.shards + (1 if policy.lock_seconds else 0))]


def _usage(check: Check, decisions: Sequence[Decision], now: float) -> PolicyUsage:
    policy = check.policy
    shards = decisions[: policy.shards]
    remaining = sum(decision.available for decision in shards)
    # A unit frees first in the shard that frees one soonest.
    reset = min(decision.reset for decision in shards)
    retry_after = 0.0 if remaining else min(decision.retry_after for decision in shards)
    locked_out = False
    if policy.lock_seconds:
        unlocked = decisions[-1]
        locked_out = not shards[0].allowed and (
            unlocked.allowed or unlocked.retry_after < shards[0].retry_after
        )
    return PolicyUsage(
        policy=policy,
        identity=check.identity,
        used=round(sum(decision.count for decision in shards)),
        remaining=remaining,
        reset=math.ceil(reset),
        retry_after=math.ceil(retry_after),
        locked_out=locked_out,
        resets_at=_resets_at(policy, now + reset),
    )


def _resets_at(policy: CompiledPolicy, at: float) -> dt.datetime:
    """``at`` as a time: a calendar period's boundary to the second in its zone (the
    clocks of Redis and the web server differ by less than that), else rounded up, UTC."""
    if policy.calendar:
        return dt.datetime.fromtimestamp(round(at), periods.zone(policy.time_zone))
    return dt.datetime.fromtimestamp(math.ceil(at), dt.UTC)


#: ``policy`` (as applied to a client) without its lockout, made once per policy.
_without_lockout = functools.lru_cache(maxsize=128)(CompiledPolicy.without_lockout)
