"""Reading keys' usage without consuming: the decide script run with recording off, with
each key's TTL, size and its client's lockout, in pipelined batches."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import redis

from ratelimits.engine import limiter
from ratelimits.engine.decision import Decision
from ratelimits.engine.keys import names as keys
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.store.connection import Client
from ratelimits.tools.applied_rules import Applied
from ratelimits.tools.inventory.keyspace import by_node
from ratelimits.tools.inventory.policies import lock_to_read, policy_check
from ratelimits.tools.key_timing import Lockout, lockout_from

#: Keys per pipelined batch of reads.
READ_BATCH = 500


@dataclass(frozen=True, slots=True)
class KeyUsage:
    """One key's current state.

    ``decision`` is what the key's policy, as it applies to the key's client, would
    answer for one more request now (``None`` when the client is exempt, or the policy
    is gone or now uses another algorithm, see ``note``). ``rule`` is what applies to the
    client (:mod:`ratelimits.tools.applied_rules`: the override's limit, or an exemption);
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
