"""Keys written by the release before weighted entries (a deploy upgrades live): the
logs and leases it left are read correctly, each old member or ring entry one unit."""

from __future__ import annotations

import struct

import pytest

from ratelimits.engine import limiter
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
