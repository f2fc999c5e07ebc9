"""Near the limit (``RATELIMITS["NEAR_LIMIT"]``): the admitted request that takes a client's
count to the fraction of its limit, as the limiter marks it (``verdict.near_limit``) and
counts it for the dashboard, against the real Redis."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from ratelimits.engine import limiter
from ratelimits.engine.decision import Verdict, outcomes
from ratelimits.engine.keys.identity import ip_identity
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.reporting import stats
from ratelimits.engine.store import connection
from ratelimits.models import PolicyOverride
from ratelimits.signals import request_near_limit
from ratelimits.tools import stats_reading
from tests.helpers import IDENTITY, create_policy, policy

RATE_ALGORITHMS = ["sliding_log", "compact_log", "sliding_counter", "fixed_window", "token_bucket"]
#: A fixed clock for replays: every request at the same instant, so no unit leaves a
#: window or leaks from a bucket while a test runs.
NOW = 1_700_000_000.0


@pytest.fixture(autouse=True)
def near_at_80(settings: Any) -> None:
    settings.RATELIMITS = {**settings.RATELIMITS, "NEAR_LIMIT": 0.8}


def near(verdict: Verdict) -> list[str]:
    return [decision.policy for decision in verdict.near_limit]


def replay(p: CompiledPolicy, n: int, *, cost: int | None = None, shard: int = 0) -> list[Verdict]:
    """``n`` requests of one client at :data:`NOW`."""
    check = limiter.Check(p, IDENTITY, shard=shard, cost=cost)
    return [limiter.decide([check], now=NOW) for _ in range(n)]


@pytest.mark.parametrize("algorithm", [*RATE_ALGORITHMS, "concurrency"])
def test_of_ten_only_the_8th_request_is_near_the_limit(algorithm):
    verdicts = replay(policy(algorithm, 10, 3600, name="ten"), 11)
    assert [v.allowed for v in verdicts] == [True] * 10 + [False]
    # 1-7 stay below 8; the 8th reaches it; 9 and 10 were there already; 11 is denied.
    assert [near(v) for v in verdicts] == [[]] * 7 + [["ten"]] + [[]] * 3
    assert verdicts[7].near_limit == verdicts[7].decisions


def test_the_default_is_80_percent(settings):
    settings.RATELIMITS = {k: v for k, v in settings.RATELIMITS.items() if k != "NEAR_LIMIT"}
    verdicts = replay(policy("fixed_window", 5, 3600, name="five"), 5)
    assert [near(v) for v in verdicts] == [[], [], [], ["five"], []]  # 4 of 5 = 80%


@pytest.mark.parametrize(
    ("fraction", "limit", "crossing"),
    [(0.14, 50, 7), (0.7, 10, 7), (0.75, 10, 8), (1, 10, 10), (0.05, 10, 1)],
    ids=["0.14 of 50 (7.000000000000001 as a float)", "0.7", "0.75", "1", "0.05"],
)
def test_the_fraction_sets_the_request_that_crosses(settings, fraction, limit, crossing):
    settings.RATELIMITS = {**settings.RATELIMITS, "NEAR_LIMIT": fraction}
    verdicts = replay(policy("sliding_log", limit, 3600, name="f"), limit)
    assert [i + 1 for i, v in enumerate(verdicts) if v.near_limit] == [crossing]


@pytest.mark.parametrize("where", ["the request", "the policy"])
def test_a_cost_of_3_crossing_in_one_jump_counts_once(where):
    if where == "the policy":
        verdicts = replay(policy("sliding_log", 10, 3600, name="jump", cost=3), 4)
    else:
        verdicts = replay(policy("sliding_log", 10, 3600, name="jump"), 4, cost=3)
    # 0 -> 3, 3 -> 6, 6 -> 9 (past 8), then 9 + 3 is over 10.
    assert [v.allowed for v in verdicts] == [True, True, True, False]
    assert [near(v) for v in verdicts] == [[], [], ["jump"], []]


def test_a_shadow_policy_counts_until_it_would_deny():
    verdicts = replay(policy("sliding_log", 10, 3600, name="shadow", mode="shadow"), 12)
    assert all(v.allowed for v in verdicts)
    assert [v.decisions[0].shadow_denied for v in verdicts] == [False] * 10 + [True] * 2
    assert [near(v) for v in verdicts] == [[]] * 7 + [["shadow"]] + [[]] * 4
    assert not verdicts[7].near_limit[0].enforce  # a receiver can tell


def test_a_request_a_shadow_policy_would_deny_is_not_near_even_across_the_line():
    p = policy("sliding_log", 10, 3600, name="shadow", mode="shadow")
    check = limiter.Check(p, IDENTITY)
    assert near(limiter.decide([limiter.Check(p, IDENTITY, cost=7)], now=NOW)) == []  # 7
    over = limiter.decide([limiter.Check(p, IDENTITY, cost=4)], now=NOW)  # 7 + 4 > 10
    assert over.allowed and over.decisions[0].shadow_denied
    assert near(over) == []
    assert near(limiter.decide([check], now=NOW)) == ["shadow"]  # 7 -> 8


def test_a_request_another_policy_denies_takes_no_policy_near_its_limit():
    wide = policy("sliding_log", 10, 3600, name="wide")
    tight = policy("fixed_window", 7, 3600, name="tight")
    both = [limiter.Check(wide, IDENTITY), limiter.Check(tight, IDENTITY)]
    verdicts = [limiter.decide(both, now=NOW) for _ in range(8)]
    assert [v.allowed for v in verdicts] == [True] * 7 + [False]
    # tight crosses 5.6 with its 6th; the 8th, denied by tight, leaves wide at 7.
    assert [near(v) for v in verdicts] == [[]] * 5 + [["tight"]] + [[]] * 2
    alone = limiter.decide([limiter.Check(wide, IDENTITY)], now=NOW)
    assert near(alone) == ["wide"]  # 7 -> 8


def test_two_policies_crossing_in_one_request_each_count():
    a, b = policy("sliding_log", 10, 3600, name="a"), policy("fixed_window", 5, 3600, name="b")
    checks = [limiter.Check(a, IDENTITY, cost=2), limiter.Check(b, IDENTITY)]
    verdicts = [limiter.decide(checks, now=NOW) for _ in range(4)]
    # a: 2, 4, 6, 8 (crosses at the 4th); b: 1, 2, 3, 4 (crosses at the 4th too).
    assert [near(v) for v in verdicts] == [[], [], [], ["a", "b"]]
    assert outcomes(verdicts[3]) == (
        ("a", "allowed"),
        ("b", "allowed"),
        ("a", "near_limit"),
        ("b", "near_limit"),
    )


def test_concurrency_counts_requests_in_progress_at_each_crossing():
    slots = policy("concurrency", 10, 60, name="slots")
    check = limiter.Check(slots, IDENTITY)
    held = [limiter.decide([check]) for _ in range(8)]
    assert [near(v) for v in held] == [[]] * 7 + [["slots"]]
    limiter.give_back(held[0].receipt, 200)  # 7 in progress
    assert near(limiter.decide([check])) == ["slots"]  # 7 -> 8 again
    for verdict in held[1:4]:
        limiter.give_back(verdict.receipt, 200)  # 5 in progress
    assert near(limiter.decide([check])) == []  # 5 -> 6


def test_a_sharded_policy_counts_each_shard_against_its_share():
    verdicts = replay(policy("sliding_log", 20, 3600, name="sharded", shards=2), 9, shard=1)
    assert [near(v) for v in verdicts] == [[]] * 7 + [["sharded"]] + [[]]  # 8 of its 10


def test_a_token_bucket_is_near_its_burst():
    verdicts = replay(policy("token_bucket", 10, 3600, name="bucket", burst=20), 17)
    assert [i + 1 for i, v in enumerate(verdicts) if v.near_limit] == [16]  # 80% of 20


def test_a_look_that_records_nothing_is_never_near():
    p = policy("sliding_log", 10, 3600, name="peek")
    replay(p, 7)
    check = limiter.Check(p, IDENTITY)
    assert limiter.decide([check], record=False, now=NOW).near_limit == ()
    _, peeked = limiter.peek([check], connection.get_client())
    assert peeked.near_limit == ()
    assert near(limiter.decide([check], now=NOW)) == ["peek"]


@pytest.mark.parametrize("value", ["0.8", 0, 2, None, True])
def test_an_invalid_setting_marks_nothing_and_breaks_no_request(settings, value):
    settings.RATELIMITS = {**settings.RATELIMITS, "NEAR_LIMIT": value}
    verdicts = replay(policy("sliding_log", 10, 3600, name="bad"), 11)
    assert [v.allowed for v in verdicts] == [True] * 10 + [False]
    assert all(v.near_limit == () for v in verdicts)


def test_the_crossing_is_counted_for_the_dashboard(redis_client):
    p = policy("sliding_log", 10, 3600, name="dash")
    for _ in range(11):  # on the Redis clock: the 11th is denied by the worker's memory
        limiter.decide([limiter.Check(p, IDENTITY)])
    assert stats.flush() is True
    read = stats_reading.series(["dash"], minutes=2)
    assert read.total("dash", "near_limit") == 1
    assert (read.total("dash", "allowed"), read.total("dash", "denied")) == (10, 1)
    fields = {}
    for key in redis_client.keys("rl:stats:*"):
        fields.update(redis_client.hgetall(key))
    assert fields[b"dash:near_limit"] == b"1"


@pytest.mark.django_db
def test_an_override_s_limit_is_the_one_near_which_a_client_is():
    items = create_policy("items", "api:items", limit=10, key="ip")
    PolicyOverride.objects.create(policy=items, identity="203.0.113.7", limit=20)
    sent: list[tuple[str, int, int]] = []

    def receiver(sender: Any, decision: Any, identity: str, **kwargs: Any) -> None:
        sent.append((identity, decision.limit, decision.remaining))

    request_near_limit.connect(receiver)
    try:
        client = Client()
        for address in ("203.0.113.7", "203.0.113.8"):
            statuses = [client.get("/api/items/", REMOTE_ADDR=address) for _ in range(20)]
            assert [r.status_code for r in statuses].count(200) == (
                20 if address.endswith("7") else 10
            )
    finally:
        request_near_limit.disconnect(receiver)
    # The overridden client at its 16th of 20 (4 left), the other at its 8th of 10.
    assert sent == [
        (ip_identity("203.0.113.7"), 20, 4),
        (ip_identity("203.0.113.8"), 10, 2),
    ]
