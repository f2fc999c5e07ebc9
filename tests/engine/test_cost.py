"""Requests that cost more than one unit, in every algorithm (explicit ``now`` unless
the worker's remembered denials are under test)."""

from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ratelimits.engine import decision, limiter
from ratelimits.engine.decision import Decision
from ratelimits.testutils import reset_state
from tests.helpers import IDENTITY, assert_said_once_a_minute, policy, remind_on

pytestmark = pytest.mark.usefixtures("backend")

ALGORITHMS = ["sliding_log", "compact_log", "sliding_counter", "fixed_window", "token_bucket"]
# A window boundary for every window used here, so the counters start a fresh window.
START = 1_745_000_400


def spend(p, now: float | None, cost: int | None = None, identity: str = IDENTITY) -> Decision:
    return limiter.decide([limiter.Check(p, identity, cost=cost)], now=now).decisions[0]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_request_of_cost_n_spends_n_units(algorithm):
    p = policy(algorithm, limit=10, window=60)
    first = spend(p, START + 1, cost=3)
    assert first.allowed and first.remaining == 7
    second = spend(p, START + 1, cost=4)
    assert second.allowed and second.remaining == 3
    assert second.count == pytest.approx(3)
    heavy = spend(p, START + 1, cost=4)
    assert not heavy.allowed and heavy.remaining == 0
    # The heavy request spent nothing: three light ones still pass, the fourth does not.
    assert [spend(p, START + 1).allowed for _ in range(4)] == [True, True, True, False]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_requests_own_cost_replaces_the_policys(algorithm):
    p = policy(algorithm, limit=10, window=60, cost=2)
    assert spend(p, START + 1).remaining == 8  # the policy's cost
    assert spend(p, START + 1, cost=5).remaining == 3  # the view's, instead
    assert not spend(p, START + 1, cost=4).allowed
    assert spend(p, START + 1, cost=1).remaining == 2
    assert spend(p, START + 1).remaining == 0


@pytest.mark.parametrize("algorithm", ["sliding_log", "compact_log"])
def test_the_log_retry_is_when_cost_entries_have_left(algorithm, redis_client):
    p = policy(algorithm, limit=5, window=60)
    for t in (100, 110, 120):
        assert spend(p, t).allowed
    denied = spend(p, 130, cost=4)  # 3 + 4 > 5: the two oldest must leave
    assert not denied.allowed
    assert denied.retry_after == 40.0  # 110 + 60 - 130
    assert not spend(p, 169.99, cost=4).allowed
    assert spend(p, 170, cost=4).allowed
    if algorithm == "sliding_log":
        # 120 and the request of cost 4 at 170: one weighted entry each ("<start>:<cost>").
        entries = redis_client.zrange(p.key_for(IDENTITY), 0, -1, withscores=True)
        assert entries == [(b"a2:1", 120_000_000), (b"a3:4", 170_000_000)]


def test_the_counter_retry_solves_for_the_cost():
    """Previous window 10 (limit 10, window 60), 30 s into the current: estimate 5; a cost
    of 8 fits once 10 x (30 - dt)/60 <= 2, dt = 18 s."""
    p = policy("sliding_counter", limit=10, window=60)
    spend(p, START - 30, cost=10)
    denied = spend(p, START + 30, cost=8)
    assert not denied.allowed and denied.retry_after == 18.0
    assert not spend(p, START + 47.99, cost=8).allowed
    assert spend(p, START + 48, cost=8).allowed


def test_the_bucket_retry_waits_for_cost_units():
    p = policy("token_bucket", limit=1, window=1, burst=5)
    spend(p, 700, cost=5)
    denied = spend(p, 700.5, cost=3)
    assert not denied.allowed and denied.retry_after == 2.5
    assert spend(p, 703, cost=3).allowed


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_request_denied_by_one_policy_spends_nothing_in_the_others(algorithm):
    loose = policy(algorithm, limit=10, window=60, name="loose")
    tight = policy(algorithm, limit=3, window=60, name="tight")
    both = [limiter.Check(loose, IDENTITY, cost=2), limiter.Check(tight, IDENTITY, cost=2)]
    assert limiter.decide(both, now=START + 1).allowed
    denied = limiter.decide(both, now=START + 1)
    assert not denied.allowed
    assert [d.allowed for d in denied.decisions] == [True, False]
    assert spend(loose, START + 1).remaining == 7  # only the first request's 2 units


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_cost_above_the_capacity_is_denied_for_a_window_and_logged_once(
    algorithm, redis_client, caplog
):
    decision._oversized.clear()
    p = policy(algorithm, limit=5, window=60, name="small")
    other = policy(algorithm, limit=5, window=60, name="other")
    with caplog.at_level(logging.WARNING, logger="ratelimits"):
        for _ in range(3):
            denied = spend(p, START + 1, cost=6)
            assert not denied.allowed and denied.retry_after == 60.0
        assert not spend(other, START + 1, cost=9).allowed
    warnings = [r.getMessage() for r in caplog.records if "can never grant" in r.getMessage()]
    assert len(warnings) == 2
    assert "small" in warnings[0] and "other" in warnings[1]
    assert redis_client.exists(p.key_for(IDENTITY)) == 0  # nothing written
    assert spend(p, START + 1, cost=5).allowed  # the capacity itself is granted


def test_a_cost_above_the_capacity_is_said_again_each_minute(monkeypatch, caplog):
    clock = remind_on(monkeypatch, decision, "_oversized")
    p = policy("fixed_window", limit=5, window=60, name="small")

    def said() -> int:
        assert not spend(p, START + 1, cost=6).allowed
        return sum("can never grant" in m for m in caplog.messages)

    with caplog.at_level(logging.WARNING, logger="ratelimits"):
        assert_said_once_a_minute(said, clock)


def test_a_bucket_capacity_is_its_burst():
    p = policy("token_bucket", limit=10, window=60, burst=3)
    assert not spend(p, START, cost=4).allowed
    assert spend(p, START, cost=3).allowed


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_remembered_denial_never_denies_a_cheaper_request(algorithm):
    """On the Redis clock: a heavy request denied, then light ones are still asked of
    Redis and admitted up to the limit; then the key blocks everything, locally."""
    p = policy(algorithm, limit=10, window=3600)
    who = "ip:192.0.2.77"
    assert spend(p, None, cost=6, identity=who).allowed
    heavy = spend(p, None, cost=6, identity=who)
    assert not heavy.allowed and not heavy.cached
    again = spend(p, None, cost=7, identity=who)  # as heavy or more: answered locally
    assert not again.allowed and again.cached
    light = [spend(p, None, cost=1, identity=who) for _ in range(5)]
    assert [d.allowed for d in light] == [True, True, True, True, False]
    # The fourth used the last unit: every request is answered locally now.
    assert light[4].cached
    assert spend(p, None, cost=1, identity=who).cached


# A request: (seconds since the previous one, the limit in force, its cost).
steps = st.lists(
    st.tuples(
        st.one_of(st.just(0.0), st.floats(0.0, 3.0), st.floats(5.0, 25.0)),
        st.sampled_from([1, 2, 3, 5, 8]),
        st.sampled_from([1, 1, 2, 3]),
    ),
    min_size=1,
    max_size=60,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(trace=steps)
def test_compact_log_decides_exactly_as_sliding_log_with_costs(trace, redis_client):
    redis_client.flushall()
    reset_state()
    now = 10_000.0
    for gap, limit, cost in trace:
        now = round(now + gap, 6)
        exact = spend(policy("sliding_log", limit=limit, window=10), now, cost=cost)
        ring = spend(policy("compact_log", limit=limit, window=10), now, cost=cost)
        fields = lambda d: (d.allowed, d.count, d.remaining, d.retry_after, d.reset)  # noqa: E731
        assert fields(ring) == fields(exact), (now, limit, cost, exact, ring)
