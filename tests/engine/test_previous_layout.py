"""Keys written by the release before weighted entries (a deploy upgrades live): the
logs and leases it left are read correctly, each old member or ring entry one unit; a
look that records nothing reads them so too, and rewrites nothing."""

from __future__ import annotations

import struct

import pytest

from ratelimits.engine import limiter
from ratelimits.engine.store import connection
from tests.helpers import IDENTITY, policy

pytestmark = pytest.mark.usefixtures("backend")


def spend(p, now, cost=1):
    return limiter.decide([limiter.Check(p, IDENTITY, cost=cost)], now=now).decisions[0]


def test_an_old_sliding_log_is_counted_and_rewritten(redis_client):
    p = policy("sliding_log", limit=5, window=60)
    key = p.key_for(IDENTITY)
    # One unit at 100, and a request of cost 2 at 110 (two members), as they were written.
    redis_client.zadd(key, {"100000000-0": 100e6, "110000000-1": 110e6, "110000000-2": 110e6})
    redis_client.pexpire(key, 60_000)
    denied = spend(p, 130, cost=3)
    assert not denied.allowed and denied.count == 3
    assert denied.retry_after == 30.0  # one unit must leave: the one at 100, at 160
    assert spend(p, 130, cost=2).remaining == 0
    members = redis_client.zrange(key, 0, -1)
    assert members == [b"a0:1", b"a1:1", b"a2:1", b"a3:2"]  # weighted entries now
    assert 0 < redis_client.pttl(key) <= 60_000


def test_old_leases_are_counted_and_given_back(redis_client):
    p = policy("concurrency", limit=3, window=60)
    key = p.key_for(IDENTITY)
    redis_client.zadd(key, {"100000000-0": 160e6, "100000000-1": 160e6})  # no running total
    redis_client.pexpire(key, 60_000)
    held = spend(p, 120)
    assert held.allowed and held.count == 2 and held.remaining == 0
    assert not spend(p, 121).allowed
    assert spend(p, 161, cost=2).allowed  # the two old leases ended; one unit is held


def test_an_old_compact_log_ring_is_copied_into_the_new_key(redis_client):
    p = policy("compact_log", limit=3, window=60)
    key = p.key_for(IDENTITY)
    legacy = key.rpartition(":")[0] + ":ring"
    assert key.endswith(":wring")
    # head 1: oldest first is 100, 110, 120 (ring slots 120, 100, 110).
    blob = struct.pack(">I", 1) + b"".join(struct.pack(">d", t * 1e6) for t in (120, 100, 110))
    redis_client.set(legacy, blob, px=60_000)
    denied = spend(p, 130)
    assert not denied.allowed and denied.count == 3 and denied.retry_after == 30.0
    assert spend(p, 160).allowed  # 100 left
    assert redis_client.get(legacy) == blob  # left to an old release, until it expires


def look(p, now, cost=1):
    """What a request would get at ``now``, recording nothing (the tools' peek)."""
    checks = [limiter.Check(p, IDENTITY, cost=cost)]
    return limiter.evaluate(checks, connection.get_client(), record=False, now=now)[1].decisions[0]


def test_a_look_at_an_old_sliding_log_counts_it_and_writes_nothing(redis_client):
    """A look runs where writes are refused (the peek function is no-writes): the old
    members are read as they would be rewritten, and left as they are."""
    p = policy("sliding_log", limit=5, window=60)
    key = p.key_for(IDENTITY)
    old = {b"100000000-0": 100e6, b"110000000-1": 110e6, b"110000000-2": 110e6}
    redis_client.zadd(key, old)
    assert look(p, 130).remaining == 1
    three = look(p, 130, cost=3)
    assert not three.allowed and three.count == 3 and three.retry_after == 30.0
    assert dict(redis_client.zrange(key, 0, -1, withscores=True)) == old


def test_a_look_at_an_old_compact_log_ring_counts_it_and_writes_nothing(redis_client):
    p = policy("compact_log", limit=3, window=60)
    key = p.key_for(IDENTITY)
    legacy = key.rpartition(":")[0] + ":ring"
    blob = struct.pack(">I", 1) + b"".join(struct.pack(">d", t * 1e6) for t in (120, 100, 110))
    redis_client.set(legacy, blob, px=60_000)
    denied = look(p, 130)
    assert not denied.allowed and denied.count == 3 and denied.retry_after == 30.0
    assert look(p, 160).allowed  # 100 left
    assert not redis_client.exists(key)
