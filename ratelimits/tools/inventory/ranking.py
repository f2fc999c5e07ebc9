"""The clients nearest their limits: one counts' key per client, ranked by what it used."""

from __future__ import annotations

from collections.abc import Iterable

from ratelimits.engine.keys import names as keys
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.store.connection import Client
from ratelimits.tools.inventory.key_usage import KeyUsage, usage
from ratelimits.tools.inventory.keyspace import scan


def clients_of(
    names: Iterable[keys.KeyName], policies: dict[str, CompiledPolicy]
) -> list[keys.KeyName]:
    """``names`` as one counts' key per client: a lockout's key stands for the counts' key
    beside it (whose counts may have expired before the lockout), and is left out when
    its policy is gone or has no lockout now."""
    seen: set[str] = set()
    found = []
    for name in names:
        if name.lock:
            policy = policies.get(name.policy)
            if policy is None or not policy.lockout:
                continue
            name = keys.counts_name(name, policy.algorithm)
        if name.key not in seen:
            seen.add(name.key)
            found.append(name)
    return found


def top(
    client: Client, policy: CompiledPolicy, *, count: int = 20, scan_limit: int = 10_000
) -> tuple[list[KeyUsage], int]:
    """The ``count`` clients with the highest counts under ``policy`` (with its overrides
    attached: each client is read under the limit that applies to it; clients locked out
    come first, exempt ones last), and how many keys were read (at most ``scan_limit``,
    so a huge key space costs a bounded scan)."""
    names = list(scan(client, policy=policy.name, limit=scan_limit))
    policies = {policy.name: policy}
    found = [
        u
        for u in usage(client, clients_of(names, policies), policies)
        if u.decision is not None or (u.rule is not None and u.rule.exempt)
    ]
    found.sort(
        key=lambda u: (u.decision is None, u.lockout is None, -(u.count or 0), u.name.identity)
    )
    return found[:count], len(names)


def nearest_limits(
    client: Client,
    policies: dict[str, CompiledPolicy],
    *,
    count: int = 5,
    scan_limit: int = 10_000,
) -> tuple[dict[str, list[KeyUsage]], int]:
    """Per policy, the ``count`` clients that used the most of the limit that applies to
    each (an override's, for an overridden client) and have a count or a lockout, most
    first; and how many keys were read (at most ``scan_limit``, over every policy)."""
    names = list(scan(client, limit=scan_limit))
    found: dict[str, list[KeyUsage]] = {}
    for u in usage(client, clients_of(names, policies), policies):
        if u.decision is not None and (u.count or u.lockout is not None):
            found.setdefault(u.name.policy, []).append(u)
    for rows in found.values():
        rows.sort(key=lambda u: (-used_share(u), u.name.key))
        del rows[count:]
    return found, len(names)


def used_share(u: KeyUsage) -> float:
    """How much of the limit that applies to the client it has used: 1.0 when it has
    nothing left now."""
    limit = u.limit or 0
    if u.remaining is None or limit <= 0:
        return 0.0
    return max(0.0, min(1.0, (limit - u.remaining) / limit))
