"""What clients use now: the change page's live-usage panel (the busiest clients of a
policy, and resets) and the dashboard's clients nearest their limits. Each client is shown
under the limit that applies to it: its override's, or none when an override exempts it;
a client locked out with when its lockout ends, and a calendar policy with when its
counts reset."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from ratelimits.engine import algorithms
from ratelimits.engine.keys.kinds import is_hashed
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.store import connection, errors
from ratelimits.exceptions import ConfigurationError
from ratelimits.models import Policy
from ratelimits.tools import inventory, leases, lifting
from ratelimits.tools.applied_rules import with_overrides
from ratelimits.tools.key_timing import NextReset, next_reset

TOP_CLIENTS = 20
SCAN_LIMIT = 10_000
#: The dashboard's clients listed per policy, nearest their limits first.
NEAREST_CLIENTS = 5
#: A concurrency client's requests in progress listed, oldest first; the rest are counted.
LEASES_SHOWN = 10


@dataclass(frozen=True, slots=True)
class LeaseRow:
    """A request in progress under a concurrency policy, in seconds."""

    age: float
    ends_in: float


@dataclass(frozen=True, slots=True)
class ClientRow:
    """One client: its count and what it has left under the limit that applies to it
    (``limit``: its override's, when one applies; ``None`` when ``exempt``)."""

    identity: str
    hashed: bool
    count: float
    remaining: int
    limit: int | None
    reset: float
    ttl: float | None
    #: concurrency: the client's requests in progress, oldest first (at most
    #: :data:`LEASES_SHOWN`), and how many more there are.
    leases: tuple[LeaseRow, ...] = ()
    more_leases: int = 0
    #: The override that applied ("user bob", "group partners", "203.0.113.0/24"), or "".
    override: str = ""
    #: True when the override exempts the client: its requests are not counted.
    exempt: bool = False
    #: When the client's lockout ends (UTC) and the seconds left; ``None`` when it is not
    #: locked out.
    locked_until: dt.datetime | None = None
    locked_for: float | None = None


@dataclass(frozen=True, slots=True)
class LiveUsage:
    rows: list[ClientRow]
    keys_read: int
    truncated: bool
    error: str = ""
    #: True for a concurrency policy: counts are requests in progress, with their leases.
    concurrency: bool = False
    #: A calendar policy's next reset (on the Redis clock); ``None`` for a rolling window.
    next_reset: NextReset | None = None


def policy_usage(row: Policy) -> LiveUsage:
    """:func:`live_usage` of a stored policy; an ``error`` when it does not compile here
    (a time zone this machine does not know)."""
    try:
        policy = CompiledPolicy.from_model(row)
    except ValueError as e:
        return LiveUsage([], 0, False, error=f"This policy does not compile here: {e}")
    return live_usage(policy)


def live_usage(policy: CompiledPolicy) -> LiveUsage:
    """The top clients by count under ``policy``, those locked out first; an ``error``
    when Redis cannot answer. For a concurrency policy, each client's requests in
    progress too; for a calendar policy, when its counts reset. Consumes nothing."""
    concurrency = algorithms.released(policy.algorithm)
    [policy] = with_overrides([policy])
    try:
        client = connection.get_tool_client()
        found, keys_read = inventory.top(client, policy, count=TOP_CLIENTS, scan_limit=SCAN_LIMIT)
        held = leases.read(client, [u.name for u in found]) if concurrency else {}
        reset = next_reset(policy, _now_us(client)) if policy.calendar else None
    except (*connection.REDIS_ERRORS, ConfigurationError) as e:
        return LiveUsage([], 0, False, error=f"Redis {errors.what_went_wrong(e)}: {e}")
    rows = []
    for u in found:
        live = held[u.name.key].live if u.name.key in held else ()
        now_us = held[u.name.key].now_us if live else 0
        rows.append(
            client_row(
                u,
                leases=tuple(
                    LeaseRow(lease.age(now_us), lease.ends_in(now_us))
                    for lease in live[:LEASES_SHOWN]
                ),
                more_leases=max(0, len(live) - LEASES_SHOWN),
            )
        )
    return LiveUsage(
        rows,
        keys_read,
        truncated=keys_read >= SCAN_LIMIT,
        concurrency=concurrency,
        next_reset=reset,
    )


def _now_us(client: connection.Client) -> int:
    """The Redis clock (of the first primary, on a cluster), in microseconds."""
    seconds, micros = connection.node_clients(client)[0].time()
    return int(seconds) * 1_000_000 + int(micros)


def client_row(
    u: inventory.KeyUsage, leases: tuple[LeaseRow, ...] = (), more_leases: int = 0
) -> ClientRow:
    """``u`` as a row of the admin's tables."""
    return ClientRow(
        identity=u.name.identity,
        hashed=is_hashed(u.name.identity),
        count=u.count or 0.0,
        remaining=u.remaining or 0,
        limit=u.limit,
        reset=u.decision.reset if u.decision else 0.0,
        ttl=u.ttl,
        leases=leases,
        more_leases=more_leases,
        override=u.rule.override if u.rule else "",
        exempt=u.rule.exempt if u.rule else False,
        locked_until=u.lockout.until if u.lockout else None,
        locked_for=u.lockout.left if u.lockout else None,
    )


@dataclass(frozen=True, slots=True)
class NearestLimits:
    """The dashboard's clients: per policy, those that used the most of their limits."""

    by_policy: dict[str, list[ClientRow]]
    keys_read: int
    truncated: bool
    error: str = ""


def nearest_limits() -> NearestLimits:
    """Per policy, the :data:`NEAREST_CLIENTS` clients that used the most of the limit
    that applies to each, from one bounded scan of every policy's keys (at most
    :data:`SCAN_LIMIT` read); an ``error`` when Redis cannot answer. Consumes nothing."""
    try:
        client = connection.get_tool_client()
        found, keys_read = inventory.nearest_limits(
            client, inventory.known_policies(), count=NEAREST_CLIENTS, scan_limit=SCAN_LIMIT
        )
    except (*connection.REDIS_ERRORS, ConfigurationError) as e:
        return NearestLimits({}, 0, False, error=f"Redis {errors.what_went_wrong(e)}: {e}")
    by_policy = {name: [client_row(u) for u in rows] for name, rows in found.items()}
    return NearestLimits(by_policy, keys_read, truncated=keys_read >= SCAN_LIMIT)


def reset_counters(
    policy_name: str, who: str | None = None, sender: object = None, by: Any = None
) -> tuple[int, int]:
    """Delete the policy's keys (one client's with ``who``), their lockouts too, each
    lifted lock announced (``lockout_lifted`` from ``sender``, ``by`` the admin's user):
    ``(keys deleted, lockouts lifted)``; raises on Redis errors."""
    client = connection.get_tool_client()
    names = tuple(inventory.scan(client, policy=policy_name, identity=who))
    found = lifting.Found(who or policy_name, (who,) if who else (), names)
    return lifting.lift(client, found, sender, by), len(found.locks)
