"""The limiter's keys in Redis, for tools: find them, read their usage, delete them.

Keys are found with ``SCAN`` and a ``MATCH`` pattern built from the key layout (never
``KEYS``, which blocks the server); on a Redis Cluster every primary is scanned, and
reads and deletes go to each key's node. Reading never consumes: counts come from the
decide script run with recording off, so they are the numbers the limiter itself would
see.

A lockout's key (``...:<policy>:lock``) is found by the same scans. :func:`usage` reads it
as a row of its own, with the lockout it holds and no count; the counts' key of a policy
with a lockout carries its client's lockout too. The tools that rank clients
(:func:`top`, :func:`nearest_limits`) read a client once, by its counts' key, which a
lockout's key stands for when the counts have expired before the lockout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from ratelimits.conf import app_settings
from ratelimits.engine import keys, limiter, table
from ratelimits.engine.decision import Decision
from ratelimits.engine.policy import CompiledPolicy
from ratelimits.engine.store import connection
from ratelimits.engine.store.connection import Client
from ratelimits.models import Policy
from ratelimits.tools.applied import Applied, applied, with_overrides
from ratelimits.tools.timing import Lockout, lockout_from

#: Keys per ``SCAN`` call (a hint to Redis) and per pipelined batch of reads.
SCAN_BATCH = 1000
READ_BATCH = 500

#: ``progress(examined, found)`` is called after every ``SCAN`` call.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class KeyUsage:
    """One key's current state.

    ``decision`` is what the key's policy, as it applies to the key's client, would
    answer for one more request now (``None`` when the client is exempt, or the policy
    is gone or now uses another algorithm, see ``note``). ``rule`` is what applies to the
    client (:mod:`ratelimits.tools.applied`: the override's limit, or an exemption);
    ``None`` when the policy is gone or the key is left over from another algorithm.
    ``ttl`` is in seconds (``None``: the key has no expiry); ``memory`` is ``MEMORY
    USAGE`` in bytes. ``lockout`` is the client's lockout while it lasts, on a lockout's
    own key (which has no decision) and on the counts' key of a policy with a lockout.
    """

    name: keys.KeyName
    policy: CompiledPolicy | None
    decision: Decision | None
    ttl: float | None
    memory: int | None
    note: str = ""
    rule: Applied | None = None
    lockout: Lockout | None = None

    @property
    def count(self) -> float | None:
        return self.decision.count if self.decision else None

    @property
    def limit(self) -> int | None:
        """The limit that applies to the client (an override's); ``None`` when exempt, and
        on a lockout's key."""
        if self.name.lock:
            return None
        if self.rule is None:
            return self.policy.limit if self.policy else None
        return self.rule.policy.limit if self.rule.policy else None

    @property
    def remaining(self) -> int | None:
        """Requests the client may still send now."""
        return self.decision.available if self.decision else None


class KnownPolicies(dict[str, CompiledPolicy]):
    """Compiled policies by name; :attr:`unusable` names the stored ones that do not
    compile on this machine, with why (a time zone its database does not know)."""

    def __init__(self, policies: dict[str, CompiledPolicy], unusable: dict[str, str]) -> None:
        super().__init__(policies)
        self.unusable = unusable


def known_policies() -> KnownPolicies:
    """Every policy in the database by name, the disabled ones too (they may have keys),
    with their overrides; one that does not compile is left out, in ``unusable``."""
    compiled, unusable = [], {}
    for row in Policy.objects.all():
        try:
            compiled.append(CompiledPolicy.from_model(row))
        except ValueError as e:
            unusable[row.name] = str(e)
    return KnownPolicies({p.name: p for p in with_overrides(compiled)}, unusable)


def missing_policy_note(name: str, policies: dict[str, CompiledPolicy]) -> str:
    """Why a key's policy ``name`` is not among ``policies``: deleted, or not usable here."""
    reason = getattr(policies, "unusable", {}).get(name)
    return "policy deleted" if reason is None else f"the policy does not compile here: {reason}"


def key_count(client: Client) -> int:
    """How many keys the server holds (every primary's, on a cluster): ``DBSIZE``."""
    return sum(int(node.dbsize()) for node in connection.node_clients(client))


def scan(
    client: Client,
    *,
    policy: str | None = None,
    identity: str | None = None,
    identity_glob: str | None = None,
    limit: int | None = None,
    progress: Progress | None = None,
) -> Iterator[keys.KeyName]:
    """The limiter's keys, optionally of one ``policy`` and one ``identity`` (or identities
    matching ``identity_glob``). Stops scanning once ``limit`` keys were found."""
    prefix = app_settings.KEY_PREFIX
    pattern = keys.scan_pattern(
        prefix, identity=identity, identity_glob=identity_glob, policy=policy
    )
    seen: set[str] = set()  # SCAN may return a key twice while Redis resizes its table
    examined = 0
    for node in connection.node_clients(client):
        cursor = 0
        while True:
            cursor, batch = node.scan(cursor, match=pattern, count=SCAN_BATCH)
            examined += SCAN_BATCH
            for raw in batch:
                name = keys.parse_key(raw, prefix)
                if name is None or name.key in seen:
                    continue
                if identity is not None and name.identity != identity:
                    continue  # the pattern is a prefix: ip:10.0.0.1 matched ip:10.0.0.12
                seen.add(name.key)
                yield name
                if limit is not None and len(seen) >= limit:
                    return
            if progress is not None:
                progress(examined, len(seen))
            if cursor == 0:
                break


def usage(
    client: Client,
    names: Iterable[keys.KeyName],
    policies: dict[str, CompiledPolicy],
) -> Iterator[KeyUsage]:
    """The state of each key, read in pipelined batches (one round trip per batch)."""
    batch: list[keys.KeyName] = []
    for name in names:
        batch.append(name)
        if len(batch) >= READ_BATCH:
            yield from _read_batch(client, batch, policies)
            batch = []
    if batch:
        yield from _read_batch(client, batch, policies)


def delete(client: Client, names: Iterable[keys.KeyName]) -> int:
    """Delete the keys (``UNLINK``, in batches); returns how many existed.

    Workers are told, through the policy table's version stamp, to forget the denials
    they remember (:mod:`ratelimits.engine.denials`), so the clients reset are let in again
    within ``POLICY_REFRESH_INTERVAL``."""
    deleted = 0
    batch: list[str] = []
    for name in names:
        batch.append(name.key)
        if len(batch) >= SCAN_BATCH:
            deleted += _unlink(client, batch)
            batch = []
    if batch:
        deleted += _unlink(client, batch)
    if deleted:
        table.mark_changed()
    return deleted


def _unlink(client: Client, batch: list[str]) -> int:
    if not connection.is_cluster(client):
        return int(client.unlink(*batch))
    # A cluster refuses a multi-key command across slots: one UNLINK per key, pipelined
    # per node.
    deleted = 0
    for node, found in by_node(client, batch, key=lambda k: k).items():
        pipe = node.pipeline(transaction=False)
        for key in found:
            pipe.unlink(key)
        deleted += sum(int(n) for n in pipe.execute())
    return deleted


def by_node(client: Client, items: list, *, key: Callable[[Any], str]) -> dict[Any, list]:
    """``items`` grouped by the node client that holds ``key(item)``, in order."""
    groups: dict[str, tuple[redis.Redis, list]] = {}
    for item in items:
        node = connection.node_client(client, key(item))
        name = connection.describe(node)
        groups.setdefault(name, (node, []))[1].append(item)
    return dict(groups.values())


def policy_check(
    name: keys.KeyName, policies: dict[str, CompiledPolicy], previous: Sequence[str] = ()
) -> tuple[limiter.Check | None, Applied | None, str]:
    """The check that reads ``name`` as the request path would for its client (under the
    override that applies to it), what applies to the client, and why there is no check
    when there is none (an exempt client has no check and no note). ``previous``: the
    client's identity under each ``SECRET_KEY_FALLBACKS`` key (see :func:`applied`)."""
    policy = policies.get(name.policy)
    if policy is None:
        return None, None, missing_policy_note(name.policy, policies)
    if name.lock:  # a time, not counts: nothing to decide on
        return None, None, "" if policy.lockout else "left over: the policy has no lockout now"
    if policy.algorithm != name.algorithm:
        return None, None, f"left over: the policy now uses {policy.algorithm}"
    rule = applied(policy, name.identity, previous)
    if rule.policy is None:
        return None, rule, ""
    shards = rule.policy.shards  # an override's lower limit may leave fewer shards
    if (name.shard is None) != (shards == 1) or (name.shard or 0) >= shards:
        whose = f" under {rule.override}" if rule.override else ""
        return None, rule, f"left over: the policy now has {shards} shard(s){whose}"
    return limiter.Check(rule.policy, name.identity, name.shard or 0), rule, ""


def _read_batch(
    client: Client, names: list[keys.KeyName], policies: dict[str, CompiledPolicy]
) -> list[KeyUsage]:
    groups = by_node(client, names, key=lambda name: name.key)  # one node: one group
    found = {
        usage.name.key: usage
        for node, group in groups.items()
        for usage in _read_node_batch(node, group, policies)
    }
    return [found[name.key] for name in names if name.key in found]


def _read_node_batch(
    client: redis.Redis, names: list[keys.KeyName], policies: dict[str, CompiledPolicy]
) -> list[KeyUsage]:
    """One pipelined round trip to one server for ``names`` (all held by it), with its
    clock for the lockouts."""
    pipe = client.pipeline(transaction=False)
    pipe.time()
    plans = []
    for name in names:
        check, rule, note = policy_check(name, policies)
        if check is not None:
            limiter.queue_peek([check], pipe)
        pipe.pttl(name.key)
        pipe.memory_usage(name.key)
        lock = lock_to_read(name, policies)
        if lock is not None:
            pipe.get(lock)
        plans.append((name, check, rule, note, lock))
    now, *rest = pipe.execute(raise_on_error=False)
    if isinstance(now, Exception):
        raise now
    now_us = int(now[0]) * 1_000_000 + int(now[1])
    replies = iter(rest)
    found = []
    for name, check, rule, note, lock in plans:
        decision = None
        if check is not None:
            reply = next(replies)
            if isinstance(reply, Exception):
                note = f"unreadable: {reply}"
            else:
                decision = limiter.verdict_from([check], reply)[1].decisions[0]
        pttl, memory = next(replies), next(replies)
        held = next(replies) if lock is not None else None
        lockout = None if isinstance(held, Exception) else lockout_from(held, now_us)
        if isinstance(pttl, int) and pttl == -2 and (name.lock or lockout is None):
            continue  # expired between SCAN and now (or counts gone, and no lockout left)
        found.append(
            KeyUsage(
                name=name,
                policy=policies.get(name.policy),
                decision=decision,
                ttl=pttl / 1000 if isinstance(pttl, int) and pttl >= 0 else None,
                memory=memory if isinstance(memory, int) else None,
                note=note,
                rule=rule,
                lockout=lockout,
            )
        )
    return found


def lock_to_read(name: keys.KeyName, policies: dict[str, CompiledPolicy]) -> str | None:
    """The lockout's key to read with ``name``: its own for a lockout's key, the one
    beside it for the counts' key of a policy with a lockout; else ``None``."""
    if name.lock:
        return name.key
    policy = policies.get(name.policy)
    if policy is None or not policy.lockout or policy.algorithm != name.algorithm:
        return None
    return keys.lock_key(name.key)


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


def reset(client: Client, policy: str, identity: str | None = None) -> int:
    """Delete ``policy``'s keys (only ``identity``'s when given); returns how many."""
    return delete(client, scan(client, policy=policy, identity=identity))


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
