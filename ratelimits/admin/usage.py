"""The change page's live-usage panel: the busiest clients of a policy, and resets."""

from __future__ import annotations

from dataclasses import dataclass

from ratelimits.engine.identity import is_hashed
from ratelimits.engine.policy import CONCURRENCY, CompiledPolicy
from ratelimits.engine.store import connection
from ratelimits.exceptions import ConfigurationError
from ratelimits.tools import inventory, leases

TOP_CLIENTS = 20
SCAN_LIMIT = 10_000
#: A concurrency client's requests in progress listed, oldest first; the rest are counted.
LEASES_SHOWN = 10


@dataclass(frozen=True, slots=True)
class LeaseRow:
    """A request in progress under a concurrency policy, in seconds."""

    age: float
    ends_in: float


@dataclass(frozen=True, slots=True)
class ClientRow:
    identity: str
    hashed: bool
    count: float
    remaining: int
    limit: int
    reset: float
    ttl: float | None
    #: concurrency: the client's requests in progress, oldest first (at most
    #: :data:`LEASES_SHOWN`), and how many more there are.
    leases: tuple[LeaseRow, ...] = ()
    more_leases: int = 0


@dataclass(frozen=True, slots=True)
class LiveUsage:
    rows: list[ClientRow]
    keys_read: int
    truncated: bool
    error: str = ""
    #: True for a concurrency policy: counts are requests in progress, with their leases.
    concurrency: bool = False


def live_usage(policy: CompiledPolicy) -> LiveUsage:
    """The top clients by count under ``policy``; an ``error`` when Redis cannot answer.
    For a concurrency policy, each client's requests in progress too. Consumes nothing."""
    concurrency = policy.algorithm == CONCURRENCY
    try:
        client = connection.get_tool_client()
        found, keys_read = inventory.top(client, policy, count=TOP_CLIENTS, scan_limit=SCAN_LIMIT)
        held = leases.read(client, [u.name for u in found]) if concurrency else {}
    except (*connection.REDIS_ERRORS, ConfigurationError) as e:
        return LiveUsage([], 0, False, error=f"Redis did not answer: {e}")
    rows = []
    for u in found:
        live = held[u.name.key].live if u.name.key in held else ()
        now_us = held[u.name.key].now_us if live else 0
        rows.append(
            ClientRow(
                identity=u.name.identity,
                hashed=is_hashed(u.name.identity),
                count=u.count or 0.0,
                remaining=u.remaining or 0,
                limit=policy.limit,
                reset=u.decision.reset if u.decision else 0.0,
                ttl=u.ttl,
                leases=tuple(
                    LeaseRow(lease.age(now_us), lease.ends_in(now_us))
                    for lease in live[:LEASES_SHOWN]
                ),
                more_leases=max(0, len(live) - LEASES_SHOWN),
            )
        )
    return LiveUsage(rows, keys_read, truncated=keys_read >= SCAN_LIMIT, concurrency=concurrency)


def reset_counters(policy_name: str, who: str | None = None) -> int:
    """Delete the policy's keys (one client's with ``who``); raises on Redis errors."""
    return inventory.reset(connection.get_tool_client(), policy_name, who)
