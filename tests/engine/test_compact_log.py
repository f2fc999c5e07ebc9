"""compact_log: the exact log in a ring. It must decide exactly as sliding_log does, in
16 bytes per admitted request in the window whatever its cost."""

from __future__ import annotations

import logging
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ratelimits.engine import limiter
from ratelimits.engine.decision import Decision
from ratelimits.engine.store import connection
from ratelimits.testing.replay import queue_decide
from ratelimits.testutils import reset_state
from tests.helpers import IDENTITY, hit, policy

pytestmark = pytest.mark.usefixtures("backend")


def ring_entries(redis_client, key: str) -> list[tuple[int, int]]:
    """The ring's entries, oldest first, as (time, units) (as the Lua code lays them out:
    a header of head, size and base, then slots of time and end position)."""
    blob = redis_client.get(key)
    head, size, base = struct.unpack(">IId", blob[:16])
    capacity = (len(blob) - 16) // 16
    entries, before = [], base
    for k in range(size):
        offset = 16 + 16 * ((head + k) % capacity)
        time, end = struct.unpack(">dd", blob[offset : offset + 16])
        entries.append((int(time), int(end - before)))
        before = end
    return entries


def ring_times(redis_client, key: str) -> list[int]:
    """The times of the ring's entries, oldest first."""
    return [time for time, _ in ring_entries(redis_client, key)]


def same(a: Decision, b: Decision) -> bool:
    return (a.allowed, a.count, a.remaining, a.retry_after, a.reset) == (
        b.allowed,
        b.count,
        b.remaining,
        b.retry_after,
        b.reset,
    )


# A request: (seconds since the previous one, the limit in force).
steps = st.lists(
    st.tuples(
        st.one_of(st.just(0.0), st.floats(0.0, 3.0), st.floats(5.0, 25.0)),
        st.sampled_from([1, 2, 3, 5, 8]),
    ),
    min_size=1,
    max_size=80,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(trace=steps)
def test_decides_exactly_as_sliding_log(trace, redis_client):
    """Every field of every decision matches, through bursts, idle gaps, equal timestamps
    and limit changes (lowered, raised, lowered then raised again)."""
    redis_client.flushall()
    reset_state()
    now = 10_000.0
    for gap, limit in trace:
        now = round(now + gap, 6)
        exact = hit(policy("sliding_log", limit=limit, window=10), now)
        ring = hit(policy("compact_log", limit=limit, window=10), now)
        assert same(ring, exact), (now, limit, exact, ring)


def test_decides_as_sliding_log_past_the_ring_read_whole(redis_client):
    """A ring of up to 255 slots is read and written whole; past that, slot by slot: the
    decisions are the same on both sides of the boundary, denials included."""
    exact_policy = policy("sliding_log", limit=300, window=10)
    ring_policy = policy("compact_log", limit=300, window=10)
    times = [100 + i * 0.01 for i in range(300)]  # the ring grows past 255 slots
    times += [103.5, 103.5]  # full: denied, told when the oldest leaves
    times += [110.0 + i * 0.01 for i in range(8)]  # the oldest leave one by one
    times += [110.075, 125.0, 125.0]  # and all of them
    decided = []
    for now in times:
        now = round(now, 6)
        exact, ring = hit(exact_policy, now), hit(ring_policy, now)
        assert same(ring, exact), (now, exact, ring)
        decided.append(ring.allowed)
    assert decided.count(False) >= 2 and decided[-1]
    assert redis_client.strlen(ring_policy.key_for(IDENTITY)) > 16 + 16 * 255


@pytest.mark.parametrize(("cost", "limit"), [(1, 20), (3, 60)])
def test_sliding_log_read_whole_or_by_rank_decides_the_same(redis_client, cost, limit):
    """sliding_log reads a log of up to 2 entries whole, a longer one at its head, its
    newest entry and by rank: the decisions, denials and their waits included, are the
    ring's on both sides."""
    exact_policy = policy("sliding_log", limit=limit, window=10)
    ring_policy = policy("compact_log", limit=limit, window=10)
    times = [100 + i * 0.1 for i in range(25)]  # past 2 entries, then denied
    times += [103.0, 103.0, 110.05, 110.25, 111.0, 112.55, 130.0]
    decided = []
    for now in times:
        now = round(now, 6)
        exact = limiter.decide([limiter.Check(exact_policy, IDENTITY, cost=cost)], now=now)
        ring = limiter.decide([limiter.Check(ring_policy, IDENTITY, cost=cost)], now=now)
        exact, ring = exact.decisions[0], ring.decisions[0]
        assert same(ring, exact), (now, exact, ring)
        decided.append(exact.allowed)
    assert False in decided and decided[-1]


@pytest.mark.parametrize("unit", [1, 3])
def test_sliding_log_past_its_head_decides_as_the_ring(redis_client, unit):
    """A log longer than the 2 entries read at its head: a denial whose wait lies past
    them, entries gone from the window since the last admission (1, then 19: the oldest
    in the window is then in the head, then past it), and a log whose entries all left.
    Decisions and waits are the ring's; each admission drops what left the window."""
    limit = 40 * unit
    exact_policy = policy("sliding_log", limit=limit, window=10)
    ring_policy = policy("compact_log", limit=limit, window=10)
    steps = [(100 + i * 0.1, unit) for i in range(40)]  # full: 40 entries
    steps += [(104.5, unit), (104.5, 20 * unit)]  # denied: the 1st, then the 20th leaves
    steps += [(110.05, unit)]  # the 1st left: the oldest in the window is the 2nd
    steps += [(111.95, limit), (111.95, unit)]  # 19 left: the oldest in the window is past
    steps += [(111.96, unit), (125.0, unit), (125.0, unit)]  # the head; then all left
    allowed = []
    for now, cost in steps:
        exact = limiter.decide([limiter.Check(exact_policy, IDENTITY, cost=cost)], now=now)
        ring = limiter.decide([limiter.Check(ring_policy, IDENTITY, cost=cost)], now=now)
        exact, ring = exact.decisions[0], ring.decisions[0]
        assert same(ring, exact), (now, cost, exact, ring)
        allowed.append(exact.allowed)
    assert allowed[40:] == [False, False, True, False, True, True, True, True]
    assert redis_client.zcard(exact_policy.key_for(IDENTITY)) == 2


def test_a_full_ring_at_limit_1000_is_under_17_kb(redis_client):
    p = policy("compact_log", limit=1000, window=3600)
    key = p.key_for(IDENTITY)
    # The key's node (on a cluster, pipelines of scripts go to one node).
    pipe = connection.node_client(redis_client, key).pipeline(transaction=False)
    for i in range(1000):
        queue_decide([limiter.Check(p, IDENTITY)], pipe, now=5000 + i * 0.001)
    assert all(reply[0] == 1 for reply in pipe.execute())
    assert not hit(p, 5001.5).allowed
    assert redis_client.strlen(key) == 16 + 16 * 1000  # grown by doubling, up to the limit
    assert redis_client.memory_usage(key, samples=0) <= 17 * 1024
    log = policy("sliding_log", limit=1000, window=3600)
    for i in range(1000):
        queue_decide([limiter.Check(log, IDENTITY)], pipe, now=5000 + i * 0.001)
    pipe.execute()
    # A sliding_log of as many entries is over 4 times larger (5.7 on Redis 7, 4.9 on
    # Valkey 9, 6.4 on Redis 6.2).
    ring = redis_client.memory_usage(key, samples=0)
    assert redis_client.memory_usage(log.key_for(IDENTITY), samples=0) > 4 * ring


def test_the_ring_holds_only_the_window_until_it_is_full(redis_client):
    p = policy("compact_log", limit=1000, window=10)
    key = p.key_for(IDENTITY)
    for t in (100, 101, 102):
        assert hit(p, t).allowed
    assert redis_client.strlen(key) == 16 + 16 * 4  # 1, 2, then 4 slots
    assert hit(p, 111.5).allowed  # 100 and 101 have left the window: dropped
    assert ring_times(redis_client, key) == [102_000_000, 111_500_000]


def test_a_full_ring_drops_the_entries_that_left_the_window(redis_client):
    p = policy("compact_log", limit=3, window=10)
    key = p.key_for(IDENTITY)
    for t in (100, 101, 102):
        assert hit(p, t).allowed
    denied = hit(p, 105)
    assert not denied.allowed and denied.retry_after == pytest.approx(5)
    assert hit(p, 110).allowed
    assert hit(p, 111).allowed
    assert ring_times(redis_client, key) == [102_000_000, 110_000_000, 111_000_000]
    assert redis_client.strlen(key) == 16 + 16 * 3  # the limit: slots are reused


def test_a_clock_that_steps_back_keeps_the_ring_in_order(redis_client):
    p = policy("compact_log", limit=3, window=10)
    key = p.key_for(IDENTITY)
    assert hit(p, 100).allowed
    assert hit(p, 99).allowed  # stored as the newest time seen, 100
    assert ring_times(redis_client, key) == [100_000_000, 100_000_000]
    assert hit(p, 100.5).allowed
    assert not hit(p, 109.9).allowed
    assert hit(p, 110).allowed


def test_a_foreign_value_fails_by_the_policy_not_with_a_500(redis_client, caplog):
    p = policy("compact_log", limit=3, window=10, fail_open=False)
    redis_client.set(p.key_for(IDENTITY), b"not a ring")
    with caplog.at_level(logging.ERROR, logger="ratelimits"):
        verdict = limiter.decide([limiter.Check(p, IDENTITY)])
    assert verdict.decisions[0].failed and not verdict.allowed
    assert "does not hold a compact_log ring" in caplog.text
