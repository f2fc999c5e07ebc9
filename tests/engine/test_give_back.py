"""After the response: concurrency slots come back, and ``counts`` gives back the units
of responses that do not count, in every algorithm, on a server and on a cluster."""

from __future__ import annotations

import threading

import pytest

from ratelimits.engine import limiter
from ratelimits.engine.decision import Verdict
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.receipt import Receipt
from ratelimits.engine.store import connection
from tests.helpers import IDENTITY, policy

pytestmark = pytest.mark.usefixtures("backend")

RATE_ALGORITHMS = ["sliding_log", "compact_log", "sliding_counter", "fixed_window", "token_bucket"]


def spend(*policies: CompiledPolicy, cost: int | None = None, identity: str = IDENTITY) -> Verdict:
    return limiter.decide([limiter.Check(p, identity, cost=cost) for p in policies])


def leases(redis_client, p: CompiledPolicy, identity: str = IDENTITY) -> list[bytes]:
    """The lease members of a concurrency key (without its running total, "#")."""
    return [m for m in redis_client.zrange(p.key_for(identity), 0, -1) if m != b"#"]


def in_flight(p: CompiledPolicy, identity: str = IDENTITY) -> int:
    """Units in progress now, read without taking one."""
    _, verdict = limiter.peek([limiter.Check(p, identity)], connection.get_client())
    return verdict.decisions[0].limit - verdict.decisions[0].available


def test_a_concurrency_policy_admits_limit_in_flight_and_takes_slots_back():
    p = policy("concurrency", limit=2, window=60)
    first, second = spend(p), spend(p)
    assert first.allowed and second.allowed
    assert first.decisions[0].remaining == 1 and second.decisions[0].remaining == 0
    third = spend(p)
    assert not third.allowed
    assert third.retry_after == 1.0  # the documented short retry
    assert third.receipt is None  # denied: nothing held
    assert in_flight(p) == 2
    limiter.give_back(first.receipt, 200)
    assert in_flight(p) == 1
    fourth = spend(p)
    assert fourth.allowed and fourth.decisions[0].remaining == 0
    limiter.give_back(second.receipt, 500)  # whatever the status
    limiter.give_back(fourth.receipt, None)  # and with no response at all
    assert in_flight(p) == 0


def test_a_denied_slot_is_never_remembered_by_the_worker():
    """Slots free when responses end, not at a time Redis knows: the next request after
    a give-back must be asked of Redis, not denied from the worker's memory."""
    p = policy("concurrency", limit=1, window=60)
    held = spend(p)
    assert not spend(p).allowed
    limiter.give_back(held.receipt, 200)
    again = spend(p)
    assert again.allowed and not again.decisions[0].cached


def test_a_lease_not_given_back_ends_by_itself(redis_client):
    p = policy("concurrency", limit=1, window=1)
    assert spend(p).allowed
    assert not spend(p).allowed
    key = p.key_for(IDENTITY)
    assert 0 < redis_client.pttl(key) <= 1000
    threading.Event().wait(1.05)
    assert spend(p).allowed  # the first lease ended; the key holds only the new one
    assert len(leases(redis_client, p)) == 1
    assert redis_client.zscore(key, "#") == -1  # the running total: one unit


def test_a_request_taking_several_slots_gives_them_all_back(redis_client):
    p = policy("concurrency", limit=5, window=60)
    big = spend(p, cost=4)
    assert big.allowed and big.decisions[0].remaining == 1
    assert not spend(p, cost=2).allowed
    # One lease of 4 units (not 4 members), and the running total.
    assert [m.split(b"-")[1] for m in leases(redis_client, p)] == [b"0x4"]
    assert redis_client.zscore(p.key_for(IDENTITY), "#") == -4
    limiter.give_back(big.receipt, 200)
    assert redis_client.exists(p.key_for(IDENTITY)) == 0


@pytest.mark.parametrize("algorithm", RATE_ALGORITHMS)
def test_counts_failures_gives_back_a_success(algorithm):
    p = policy(algorithm, limit=3, window=60, counts="failures")
    for _ in range(10):  # successes never use up the limit
        verdict = spend(p)
        assert verdict.allowed
        limiter.give_back(verdict.receipt, 302)
    failures = [spend(p) for _ in range(3)]
    for verdict in failures:
        assert verdict.allowed
        limiter.give_back(verdict.receipt, 401)  # kept
    assert not spend(p).allowed


@pytest.mark.parametrize("algorithm", RATE_ALGORITHMS)
def test_counts_successes_gives_back_a_failure(algorithm):
    p = policy(algorithm, limit=2, window=60, counts="successes")
    for _ in range(5):
        verdict = spend(p)
        assert verdict.allowed
        limiter.give_back(verdict.receipt, 404)
    for _ in range(2):
        limiter.give_back(spend(p).receipt, 200)
    assert not spend(p).allowed


@pytest.mark.parametrize("algorithm", RATE_ALGORITHMS)
def test_a_give_back_returns_exactly_the_cost(algorithm):
    p = policy(algorithm, limit=10, window=60, counts="failures")
    kept = spend(p, cost=3)
    limiter.give_back(kept.receipt, 500)
    returned = spend(p, cost=4)
    assert returned.decisions[0].remaining == 3
    limiter.give_back(returned.receipt, 200)
    after = spend(p, cost=1)
    assert after.decisions[0].remaining == 6  # 10 - 3 kept - 1


def test_no_response_keeps_the_units_of_a_counting_policy():
    p = policy("sliding_log", limit=1, window=60, counts="failures")
    verdict = spend(p)
    limiter.give_back(verdict.receipt, None)
    assert not spend(p).allowed


def test_a_policy_that_counts_all_carries_no_receipt():
    p = policy("sliding_log", limit=5, window=60)
    assert spend(p).receipt is None


def test_all_or_nothing_with_a_rate_policy():
    """A request the concurrency policy denies spends nothing in the rate policy, and
    the reverse."""
    slots = policy("concurrency", limit=1, window=60, name="slots")
    rate = policy("sliding_log", limit=2, window=60, name="rate")
    held = spend(slots, rate)
    assert held.allowed
    denied = spend(slots, rate)  # no slot: the rate policy is not spent
    assert not denied.allowed and [d.allowed for d in denied.decisions] == [False, True]
    limiter.give_back(held.receipt, 200)
    assert in_flight(slots) == 0
    second = spend(slots, rate)
    assert second.allowed and second.decisions[1].remaining == 0  # 2 of 2: one each
    limiter.give_back(second.receipt, 200)
    # The rate is spent: the slot is not taken (asked of Redis, not the worker's memory).
    checks = [limiter.Check(slots, IDENTITY), limiter.Check(rate, IDENTITY)]
    _, over = limiter.evaluate(checks, connection.get_client(), record=True)
    assert not over.allowed and [d.allowed for d in over.decisions] == [True, False]
    assert in_flight(slots) == 0


def test_a_receipt_holds_only_the_policies_that_give_back():
    slots = policy("concurrency", limit=3, window=60, name="slots")
    rate = policy("fixed_window", limit=5, window=60, name="rate")
    failures = policy("sliding_log", limit=5, window=60, name="signin", counts="failures")
    receipt = spend(rate, slots, failures).receipt
    assert isinstance(receipt, Receipt)
    assert [check.policy.name for check in receipt.checks] == ["slots", "signin"]
    assert receipt.due(200) == [0, 1] and receipt.due(403) == [0] and receipt.due(None) == [0]


def test_a_shadow_policy_that_denied_holds_nothing():
    shadow = policy("concurrency", limit=1, window=60, name="shadow", mode="shadow")
    first = spend(shadow)
    second = spend(shadow)
    assert second.allowed and not second.decisions[0].allowed
    assert second.receipt is None
    limiter.give_back(first.receipt, 200)
    assert in_flight(shadow) == 0


def test_policies_of_several_identities_give_back_in_each_slot(redis_client):
    """Keys of different clients (an IP and a user) may live in different hash slots on
    a cluster: each gets its own give-back."""
    by_ip = policy("concurrency", limit=1, window=60, name="by-ip")
    by_user = policy("sliding_log", limit=1, window=60, name="by-user", counts="failures")
    verdict = limiter.decide(
        [limiter.Check(by_ip, "ip:10.0.0.1"), limiter.Check(by_user, "user:42")]
    )
    assert verdict.allowed
    limiter.give_back(verdict.receipt, 200)
    assert redis_client.zcard(by_ip.key_for("ip:10.0.0.1")) == 0
    assert redis_client.zcard(by_user.key_for("user:42")) == 0
