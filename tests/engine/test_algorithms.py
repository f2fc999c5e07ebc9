"""The algorithms on exact timelines (explicit ``now``), against the real script."""

from __future__ import annotations

import logging

import pytest

from ratelimits.engine import limiter
from tests.helpers import IDENTITY, hit, hit_all, policy

pytestmark = pytest.mark.usefixtures("backend")

ALGORITHMS = ["sliding_log", "compact_log", "sliding_counter", "fixed_window"]


def test_seed_sliding_log_worked_example(redis_client):
    """Entries 3650, 3680, 3695, 3710; at 3720 (window 60, limit 5) allowed, 3650 pruned."""
    login = policy("sliding_log", limit=5, window=60)
    for t in (3650, 3680, 3695, 3710):
        assert hit(login, t).allowed
    decision = hit(login, 3720)
    assert decision.allowed
    assert decision.count == 3  # 3650 has left the window
    assert decision.remaining == 1
    scores = [s for _, s in redis_client.zrange(login.key_for(IDENTITY), 0, -1, withscores=True)]
    assert scores == [t * 1_000_000 for t in (3680, 3695, 3710, 3720)]


def test_seed_sliding_counter_worked_example():
    """Previous window 8, current 3, 45 s into a 60 s window, limit 5: denied."""
    start = 1745000100  # a window boundary: 1745000100 % 60 == 0
    generous = policy("sliding_counter", limit=100, window=60, name="search")
    for i in range(8):
        assert hit(generous, start - 60 + i).allowed
    for i in range(3):
        assert hit(generous, start + i).allowed
    search = policy("sliding_counter", limit=5, window=60, name="search")
    decision = hit(search, start + 45)
    assert not decision.allowed
    assert decision.count == pytest.approx(5.0)  # 8 x 15/60 + 3
    # estimate + 1 <= 5 needs 8 x (15 - dt)/60 + 3 <= 4: dt = 7.5 s.
    assert decision.retry_after == pytest.approx(7.5)
    assert not hit(search, start + 45 + 7.49).allowed
    assert hit(search, start + 45 + 7.5).allowed


def test_sliding_log_retry_after_is_when_the_oldest_entry_leaves():
    p = policy("sliding_log", limit=3, window=60)
    for t in (1000.25, 1010, 1020):
        assert hit(p, t).allowed
    denied = hit(p, 1030)
    assert not denied.allowed
    assert denied.retry_after == pytest.approx(30.25)
    assert not hit(p, 1060.24).allowed
    assert hit(p, 1060.25).allowed


def test_fixed_window_resets_at_the_clock_boundary():
    p = policy("fixed_window", limit=2, window=10)
    assert hit(p, 100).allowed and hit(p, 101).allowed
    denied = hit(p, 105.5)
    assert not denied.allowed and denied.retry_after == pytest.approx(4.5)
    assert hit(p, 110).allowed


@pytest.mark.parametrize(
    ("algorithm", "admitted"), [("fixed_window", 10), ("sliding_log", 5), ("compact_log", 5)]
)
def test_boundary_burst(algorithm, admitted):
    """5 requests just before a boundary and 5 just after: the fixed window takes 2 x limit."""
    p = policy(algorithm, limit=5, window=60)
    times = [119.5 + 0.1 * i for i in range(5)] + [120.0 + 0.1 * i for i in range(5)]
    assert sum(hit(p, t).allowed for t in times) == admitted


def test_sliding_counter_weighs_the_previous_window():
    p = policy("sliding_counter", limit=10, window=60)
    for i in range(10):
        assert hit(p, 60 + i).allowed  # window [60, 120) full
    # At 150, 30 s into [120, 180): estimate 10 x 0.5 = 5, so 5 more fit.
    assert [hit(p, 150 + 0.01 * i).allowed for i in range(6)] == [True] * 5 + [False]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_denied_requests_store_nothing(algorithm, redis_client):
    p = policy(algorithm, limit=3, window=60)
    for i in range(3):
        assert hit(p, 1000 + i * 0.01).allowed
    before = redis_client.dump(p.key_for(IDENTITY))
    for i in range(200):
        assert not hit(p, 1001 + i * 0.001).allowed
    assert redis_client.dump(p.key_for(IDENTITY)) == before
    if algorithm == "sliding_log":
        assert redis_client.zcard(p.key_for(IDENTITY)) == 3


@pytest.mark.parametrize(
    ("algorithm", "max_ttl_ms"),
    [
        ("sliding_log", 60_000),
        ("compact_log", 60_000),
        ("sliding_counter", 120_000),
        ("fixed_window", 60_000),
    ],
)
def test_every_key_has_a_ttl(algorithm, max_ttl_ms, redis_client):
    p = policy(algorithm, limit=3, window=60)
    hit(p, 1_000_000_000)
    ttl = redis_client.pttl(p.key_for(IDENTITY))
    assert 0 < ttl <= max_ttl_ms


@pytest.mark.parametrize(
    ("algorithm", "windows_kept"), [("sliding_counter", 2), ("fixed_window", 1)]
)
def test_a_counters_expiry_is_set_once_per_window(algorithm, windows_kept, redis_client):
    """A counter's expiry depends only on its window: set with the window's first count,
    it is not written again for the others, and a new window sets it again."""
    p = policy(algorithm, limit=10, window=60)
    key = p.key_for(IDENTITY)
    start = 1_000_000_020  # a window boundary
    hit(p, start + 1)
    assert redis_client.pttl(key) > 0
    redis_client.persist(key)  # were the expiry written again, the key would get one back
    for i in range(4):
        assert hit(p, start + 2 + i).allowed
    assert redis_client.pttl(key) == -1
    assert hit(p, start + 60 + 1).allowed  # the next window
    # Expiry now - start of the next window + windows_kept windows, on the real clock.
    assert 0 < redis_client.pttl(key) <= windows_kept * 60_000


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_lowered_limit_applies_to_the_counts_already_made(algorithm):
    """The limit is not in the key: editing it keeps the counters."""
    assert all(hit(policy(algorithm, limit=10, window=60), 1000 + i).allowed for i in range(5))
    lowered = policy(algorithm, limit=3, window=60)
    decision = hit(lowered, 1006)
    assert not decision.allowed
    assert decision.count == pytest.approx(5)
    raised = policy(algorithm, limit=20, window=60)
    assert hit(raised, 1007).remaining == 20 - 5 - 1  # the denied request was not counted


@pytest.mark.parametrize("algorithm", ["sliding_log", "compact_log"])
def test_log_lowered_limit_waits_for_enough_entries_to_leave(algorithm):
    for t in (1000, 1001, 1002, 1003, 1004):
        hit(policy(algorithm, limit=10, window=60), t)
    lowered = policy(algorithm, limit=3, window=60)
    # 5 counted, 3 allowed: the 3rd oldest (1002) must leave, at 1062.
    assert hit(lowered, 1010).retry_after == pytest.approx(52)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_peek_writes_nothing(algorithm, redis_client):
    p = policy(algorithm, limit=2, window=60)
    for _ in range(5):
        verdict = limiter.decide([limiter.Check(p, IDENTITY)], record=False, now=500)
        assert verdict.allowed
    assert redis_client.dbsize() == 0


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_remaining_counts_down_to_zero(algorithm):
    p = policy(algorithm, limit=4, window=60)
    assert [hit(p, 600 + i * 0.1).remaining for i in range(5)] == [3, 2, 1, 0, 0]


def test_all_or_nothing_across_policies(redis_client):
    """A request denied by one policy consumes nothing from the others."""
    strict = policy("sliding_log", limit=1, window=60, name="strict")
    loose = policy("fixed_window", limit=100, window=60, name="loose")
    counter = policy("sliding_counter", limit=100, window=60, name="counter")
    assert hit_all([strict, loose, counter], 1000).allowed
    for i in range(20):
        verdict = hit_all([strict, loose, counter], 1001 + i * 0.1)
        assert not verdict.allowed
        assert [d.allowed for d in verdict.decisions] == [False, True, True]
    assert int(redis_client.hget(loose.key_for(IDENTITY), "c")) == 1
    assert int(redis_client.hget(counter.key_for(IDENTITY), "c")) == 1
    assert hit(loose, 1003).count == 1


def test_shadow_policy_does_not_block_the_others():
    shadow = policy("sliding_log", limit=1, window=60, name="shadow", mode="shadow")
    enforced = policy("fixed_window", limit=5, window=60, name="enforced")
    results = [hit_all([shadow, enforced], 1000 + i) for i in range(6)]
    assert [v.allowed for v in results] == [True] * 5 + [False]
    assert [v.decisions[0].shadow_denied for v in results[:5]] == [False] + [True] * 4
    assert results[5].retry_after is not None


def test_the_redis_clock_is_used_without_explicit_now(redis_client):
    p = policy("sliding_log", limit=5, window=60)
    limiter.decide([limiter.Check(p, IDENTITY)])
    ((_, score),) = redis_client.zrange(p.key_for(IDENTITY), 0, -1, withscores=True)
    seconds, micros = redis_client.time()
    assert abs(score - (seconds * 1_000_000 + micros)) < 5_000_000


def test_identities_are_counted_apart():
    p = policy("fixed_window", limit=1, window=60)
    assert hit(p, 100, identity="ip:1.1.1.1").allowed
    assert hit(p, 100, identity="ip:2.2.2.2").allowed
    assert not hit(p, 100, identity="ip:1.1.1.1").allowed


def test_a_sliding_log_of_foreign_members_fails_by_the_policy_not_with_a_500(redis_client, caplog):
    """A sorted set the log did not write (members that are no weighted entry) is refused
    with a clear error: the policy's fail mode answers, and nothing is rewritten."""
    p = policy("sliding_log", limit=5, window=60, fail_open=False)
    key = p.key_for(IDENTITY)
    redis_client.zadd(key, {"100000000-0": 100e6, "110000000-1": 110e6})
    with caplog.at_level(logging.ERROR, logger="ratelimits"):
        verdict = limiter.decide([limiter.Check(p, IDENTITY)], now=120)
    assert verdict.decisions[0].failed and not verdict.allowed
    assert "does not hold a sliding_log" in caplog.text
    assert redis_client.zrange(key, 0, -1) == [b"100000000-0", b"110000000-1"]
