"""The change page's live-usage panel: the busiest clients of a policy, and resets."""

from __future__ import annotations

from dataclasses import dataclass

from ratelimits.engine.identity import is_hashed
from ratelimits.engine.policy import CompiledPolicy
from ratelimits.engine.store import connection
from ratelimits.exceptions import ConfigurationError
from ratelimits.tools import inventory

TOP_CLIENTS = 20
SCAN_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class ClientRow:
    identity: str
    hashed: bool
    count: float
    remaining: int
    limit: int
    reset: float
    ttl: float | None


@dataclass(frozen=True, slots=True)
class LiveUsage:
    rows: list[ClientRow]
    keys_read: int
    truncated: bool
    error: str = ""


def live_usage(policy: CompiledPolicy) -> LiveUsage:
    """The top clients by count under ``policy``; an ``error`` when Redis cannot answer."""
    try:
        found, keys_read = inventory.top(
            connection.get_tool_client(), policy, count=TOP_CLIENTS, scan_limit=SCAN_LIMIT
        )
    except (*connection.REDIS_ERRORS, ConfigurationError) as e:
        return LiveUsage([], 0, False, error=f"Redis did not answer: {e}")
    rows = [
        ClientRow(
            identity=u.name.identity,
            hashed=is_hashed(u.name.identity),
            count=u.count or 0.0,
            remaining=u.remaining or 0,
            limit=policy.limit,
            reset=u.decision.reset if u.decision else 0.0,
            ttl=u.ttl,
        )
        for u in found
    ]
    return LiveUsage(rows, keys_read, truncated=keys_read >= SCAN_LIMIT)


def reset_counters(policy_name: str, who: str | None = None) -> int:
    """Delete the policy's keys (one client's with ``who``); raises on Redis errors."""
    return inventory.reset(connection.get_tool_client(), policy_name, who)
