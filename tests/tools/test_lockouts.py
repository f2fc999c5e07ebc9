"""Lockouts in the tools: the lock key the decide script writes is found, read and counted
for its client, also after the client's counts expired. Clients are locked out by the
engine on the Redis clock, as the tools read them."""

from __future__ import annotations

from typing import Any

import pytest

from ratelimits.conf import app_settings
from ratelimits.engine import limiter
from ratelimits.engine.keys import names as keys
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.models import Policy
from ratelimits.testutils import reset_state
from ratelimits.tools import inventory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("backend")]

LOCKED = "ip:203.0.113.7"
BUSY = "ip:198.51.100.1"
LOCKOUT = 900


def login_policy(**fields: Any) -> CompiledPolicy:
    """``login``: fixed_window, 1 per hour per address, then locked out 15 min."""
    values = {"algorithm": "fixed_window", "limit": 1, "window": 3600, "lockout": LOCKOUT}
    row = Policy.objects.create(name="login", endpoint="api:login", key="ip", **values | fields)
    reset_state()
    return CompiledPolicy.from_model(row)


def lock_out(policy: CompiledPolicy, who: str) -> None:
    """Spend ``who``'s request, then the denial that locks it out (on the Redis clock)."""
    assert limiter.decide([limiter.Check(policy, who)]).allowed
    assert not limiter.decide([limiter.Check(policy, who)]).allowed


def redis_now_us(redis_client: Any) -> int:
    seconds, micros = redis_client.time()
    return int(seconds) * 1_000_000 + int(micros)


def test_the_lock_key_the_script_writes_is_parsed_as_a_lock(redis_client):
    policy = login_policy()
    lock_out(policy, LOCKED)
    found = sorted(inventory.scan(redis_client, policy="login"), key=lambda n: n.key)
    counts_key = policy.key_for(LOCKED)
    assert [n.key for n in found] == sorted([counts_key, keys.lock_key(counts_key)])
    lock = next(n for n in found if n.lock)
    assert (lock.policy, lock.identity, lock.algorithm, lock.shard) == ("login", LOCKED, "", None)
    assert lock.key == "rl:{ip:203.0.113.7}:login:lock"
    assert redis_client.exists(lock.key)  # the name the Lua gave it
    assert keys.counts_name(lock, "fixed_window").key == counts_key
    counts = next(n for n in found if not n.lock)
    assert (counts.algorithm, counts.lock) == ("fixed_window", False)
    prefix = app_settings.KEY_PREFIX
    assert keys.parse_key(f"{prefix}:{{{LOCKED}}}:login:locks", prefix) is None
    assert keys.parse_key(f"{prefix}:{{{LOCKED}@2}}:login:lock", prefix).shard == 2


def test_usage_reads_the_lock_and_the_lockout_of_the_counts(redis_client):
    policy = login_policy()
    lock_out(policy, LOCKED)
    now_us = redis_now_us(redis_client)
    names = list(inventory.scan(redis_client, policy="login"))
    found = {u.name.key: u for u in inventory.usage(redis_client, names, {"login": policy})}
    lock = found[keys.lock_key(policy.key_for(LOCKED))]
    assert lock.decision is None and lock.count is None and lock.note == ""
    assert lock.lockout is not None
    assert lock.lockout.left == pytest.approx(LOCKOUT, abs=5)
    assert lock.lockout.until_us == pytest.approx(now_us + LOCKOUT * 1_000_000, abs=5_000_000)
    assert lock.ttl == pytest.approx(LOCKOUT, abs=5)
    assert lock.memory and lock.memory > 0
    counts = found[policy.key_for(LOCKED)]
    assert counts.lockout is not None and counts.lockout.until_us == lock.lockout.until_us
    assert (counts.count, counts.remaining) == (1, 0)


def test_the_busiest_clients_list_a_locked_client_first_after_its_counts_expired(redis_client):
    """The lock outlives the counts (15 min against the window's last request): the
    client is listed from its lock, with nothing counted and nothing left."""
    policy = login_policy(limit=3)
    for _ in range(3):
        assert limiter.decide([limiter.Check(policy, LOCKED)]).allowed
    assert not limiter.decide([limiter.Check(policy, LOCKED)]).allowed
    for _ in range(2):
        assert limiter.decide([limiter.Check(policy, BUSY)]).allowed
    redis_client.delete(policy.key_for(LOCKED))  # the counts expired; the lock has not

    rows, read = inventory.top(redis_client, policy)
    assert read == 2  # BUSY's counts and LOCKED's lock
    assert [u.name.identity for u in rows] == [LOCKED, BUSY]
    locked = rows[0]
    assert locked.name.key == policy.key_for(LOCKED) and not locked.name.lock
    assert locked.lockout is not None and locked.lockout.left == pytest.approx(LOCKOUT, abs=5)
    assert (locked.count, locked.remaining) == (0, 0)
    assert rows[1].lockout is None and (rows[1].count, rows[1].remaining) == (2, 1)

    nearest, _ = inventory.nearest_limits(redis_client, {"login": policy})
    assert [u.name.identity for u in nearest["login"]] == [LOCKED, BUSY]


def test_a_lock_left_by_a_policy_without_a_lockout_now_is_noted_and_no_client(redis_client):
    policy = login_policy()
    lock_out(policy, LOCKED)
    redis_client.delete(policy.key_for(LOCKED))
    Policy.objects.filter(name="login").update(lockout=0)
    now = inventory.known_policies()
    [lock] = inventory.usage(redis_client, inventory.scan(redis_client), now)
    assert lock.name.lock and lock.note == "left over: the policy has no lockout now"
    assert inventory.top(redis_client, now["login"])[0] == []


def test_a_policy_that_does_not_compile_here_is_noted_not_raised(redis_client):
    """A row naming a time zone this machine lacks (stored before, or elsewhere): the tools
    list its keys with why, instead of failing on every policy."""
    quota = Policy.objects.create(
        name="quota", endpoint="api:search", algorithm="fixed_window", limit=5, key="ip",
        calendar="month", time_zone="Europe/Berlin",
    )  # fmt: skip
    compiled = CompiledPolicy.from_model(quota)
    assert limiter.decide([limiter.Check(compiled, LOCKED)]).allowed
    Policy.objects.filter(pk=quota.pk).update(time_zone="Mars/Olympus_Mons")
    known = inventory.known_policies()
    assert "quota" not in known
    assert "'Mars/Olympus_Mons' is not a known time zone" in known.unusable["quota"]
    [row] = inventory.usage(redis_client, inventory.scan(redis_client), known)
    assert row.decision is None
    assert row.note.startswith("the policy does not compile here: 'Mars/Olympus_Mons'")
