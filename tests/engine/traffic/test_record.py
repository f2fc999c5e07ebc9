"""The traffic record (``ratelimits.engine.traffic``): the levels a client's use crosses,
counted from the decide call's replies, sent by the flusher, read back; its memory, its
switches, and no Redis call on the request path. Against the real Redis (and the local
Cluster)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import override_settings

from ratelimits.engine import limiter
from ratelimits.engine.decision import Decision, Verdict
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.traffic import levels, reading, record
from ratelimits.testutils import free_port
from tests.helpers import caches_at, commands_sent, decide_calls, policy, ratelimits_settings

NOW = 1_700_000_000.0
HOUR = int(NOW // 3600)


def dead_redis(**ratelimits: Any) -> override_settings:
    """Settings pointing the limiter at a port where nothing listens."""
    return override_settings(
        CACHES=caches_at(free_port()), RATELIMITS=ratelimits_settings(**ratelimits)
    )


def replay(p: CompiledPolicy, who: str, n: int, *, at: float = NOW, cost: int | None = None):
    check = limiter.Check(p, who, cost=cost)
    return [limiter.decide([check], now=at) for _ in range(n)]


def test_the_scale_is_log_spaced_with_the_issue_s_first_levels():
    assert levels.LEVELS[:14] == (1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 32, 40)
    steps = [b / a for a, b in zip(levels.LEVELS[6:], levels.LEVELS[7:], strict=False)]
    assert max(steps) <= 1.34 and min(steps) >= 1.2  # about 25 % apart from 6 on
    assert levels.LEVELS[-1] > 2**31  # past any limit a policy can have


@pytest.mark.parametrize(
    ("count", "units", "expected"),
    [
        (0, 1, (1,)),
        (6, 1, ()),
        (7, 1, (8,)),
        (19, 1, (20,)),
        (4.3, 1, (5,)),
        (0, 12, tuple(levels.LEVELS[:8])),
        (12.5, 1, (13,)),
        (13, 3, (16,)),
    ],
)
def test_crossed_finds_the_levels_between_count_and_count_plus_units(count, units, expected):
    assert levels.crossed(count, units) == expected


def test_one_client_of_a_fixed_window_reaches_each_level_once_and_its_denials_count():
    p = policy("fixed_window", 20, 3600, name="search")
    replay(p, "ip:203.0.113.7", 25, at=NOW)
    buffered = record.pending()
    reached = {int(f): n for (h, name, f), n in buffered.items() if f.isdigit()}
    assert reached == {k: 1 for k in levels.LEVELS if k <= 20}
    assert buffered[(HOUR, "search", record.REQUESTS)] == 25
    assert buffered[(HOUR, "search", record.DENIED)] == 5


def test_a_shadow_policy_counts_would_be_denials_and_stops_at_its_limit_too():
    p = policy("fixed_window", 5, 3600, name="shadowed", mode="shadow")
    verdicts = replay(p, "ip:203.0.113.7", 8)
    assert all(v.allowed for v in verdicts)
    buffered = record.pending()
    assert buffered[(HOUR, "shadowed", record.DENIED)] == 3
    assert (HOUR, "shadowed", "6") not in buffered  # a denial is not recorded in Redis


def test_a_request_another_policy_denied_crosses_nothing():
    open_ = policy("fixed_window", 100, 3600, name="open")
    closed = policy("fixed_window", 1, 3600, name="closed")
    checks = [limiter.Check(open_, "ip:203.0.113.7"), limiter.Check(closed, "ip:203.0.113.7")]
    limiter.decide(checks, now=NOW)
    limiter.decide(checks, now=NOW)  # closed denies: open's count stays at 1
    buffered = record.pending()
    assert buffered[(HOUR, "open", "1")] == 1
    assert (HOUR, "open", "2") not in buffered
    assert buffered[(HOUR, "open", record.REQUESTS)] == 2


def test_the_record_can_be_off_per_policy_and_globally(settings):
    on = policy("fixed_window", 10, 3600, name="on")
    off = CompiledPolicy.build(
        name="off", endpoint="api:off", algorithm="fixed_window", limit=10, window=3600
    )
    from dataclasses import replace

    replay(replace(off, traffic=False), "ip:203.0.113.7", 3)
    replay(on, "ip:203.0.113.7", 3)
    assert {name for (_, name, _) in record.pending()} == {"on"}
    record.reset()
    settings.RATELIMITS = {**settings.RATELIMITS, "TRAFFIC": False}
    replay(on, "ip:203.0.113.8", 3)
    assert record.pending() == {}


def _verdict(name: str, count: float, allowed: bool = True) -> tuple[Any, Verdict]:
    p = policy("fixed_window", 100, 60, name=name)
    check = limiter.Check(p, "ip:203.0.113.7")
    decision = Decision(name, "ip:203.0.113.7", allowed, True, 100, 60, count, 0, 0.0, 0.0)
    return check, Verdict((decision,))


def test_the_flush_writes_one_hash_per_policy_hour_that_expires_in_a_week(redis_client):
    p = policy("fixed_window", 30, 3600, name="search")
    replay(p, "ip:203.0.113.7", 12)
    replay(p, "ip:203.0.113.8", 3)
    assert record.flush(now=NOW)
    key = record.traffic_key("search", HOUR)
    assert key == f"rl:traffic:{{search}}:{HOUR}"
    stored = {k.decode(): int(v) for k, v in redis_client.hgetall(key).items()}
    assert stored == {
        "1": 2,
        "2": 2,
        "3": 2,
        "4": 1,
        "5": 1,
        "6": 1,
        "8": 1,
        "10": 1,
        "requests": 15,
    }
    assert 7 * 24 * 3600 - 5 <= redis_client.ttl(key) <= 7 * 24 * 3600
    traffic = reading.read(redis_client, "search", 24, NOW)
    assert (traffic.requests, traffic.denied, traffic.at(3), traffic.at(10)) == (15, 0, 2, 1)
    assert record.pending() == {}


def test_hours_sum_over_the_span_read(redis_client):
    for hours_ago in (0, 5, 30):
        check, verdict = _verdict("search", 0)
        record.tally([check], verdict, now=NOW - hours_ago * 3600)
    assert record.flush(now=NOW - 30 * 3600)  # the oldest hour, while it is recent
    assert record.flush(now=NOW)
    assert reading.read(redis_client, "search", 1, NOW).at(1) == 1
    assert reading.read(redis_client, "search", 24, NOW).at(1) == 2
    assert reading.read(redis_client, "search", 168, NOW).at(1) == 3


def test_a_redis_outage_keeps_the_counts_and_delivers_them_once(redis_client):
    now = time.time()
    check, verdict = _verdict("kept", 0)
    record.tally([check], verdict, now=now)
    with dead_redis(BREAKER_COOLDOWN=0.05):
        assert record.flush() is False
        record.tally([check], verdict, now=now)
        assert record.flush() is False
    hour = int(now // 3600)
    assert record.pending() == {(hour, "kept", "1"): 2, (hour, "kept", "requests"): 2}
    time.sleep(0.06)
    assert record.flush() is True
    assert record.flush() is True
    stored = redis_client.hgetall(record.traffic_key("kept", hour))
    assert stored == {b"1": b"2", b"requests": b"2"}


def test_no_redis_command_is_added_to_a_request(redis_client, settings):
    """The record rides on the reply: with it on, a decided request sends the server
    exactly what it sends with it off (one call, and the commands the script runs)."""
    settings.RATELIMITS = ratelimits_settings(METRICS_FLUSH_INTERVAL=3600)
    p = policy("fixed_window", 1000, 3600, name="calls")
    limiter.decide([limiter.Check(p, "ip:203.0.113.7")])  # loads the code

    def sent(prefix: str) -> tuple[int, int]:
        limiter.decide([limiter.Check(p, "ip:203.0.113.7")])  # a settings change reconnects
        calls, commands = decide_calls(redis_client), commands_sent(redis_client)
        for i in range(200):
            limiter.decide([limiter.Check(p, f"ip:{prefix}.{i % 50}")])
        return decide_calls(redis_client) - calls, commands_sent(redis_client) - commands

    with_record = sent("198.51.100")
    assert sum(n for (_, _, f), n in record.pending().items() if f == "1") == 51  # + 203.0.113.7
    settings.RATELIMITS = ratelimits_settings(METRICS_FLUSH_INTERVAL=3600, TRAFFIC=False)
    without = sent("192.0.2")
    assert with_record == without
    assert with_record[0] == 200


def test_memory_is_bounded_whatever_the_number_of_clients(redis_client):
    """10,000 rotating clients, each to its own level, a week of hours: the hashes hold
    at most the scale's levels, so a policy's record stays under 64 KB."""
    p = policy("fixed_window", 5000, 3600, name="many")
    for i in range(10_000):
        uses = 1 + (i * 7919) % 1200
        check = limiter.Check(p, f"ip:10.{i // 250}.{i % 250}.1")
        decision = Decision("many", check.identity, True, True, 5000, 3600, 0.0, 0, 0.0, 0.0)
        record.tally([limiter.Check(p, check.identity, cost=uses)], Verdict((decision,)), now=NOW)
    assert record.flush(now=NOW)
    one_hour = redis_client.memory_usage(record.traffic_key("many", HOUR))
    assert one_hour < 64 * 1024 / 168, one_hour
    # A week of such hours.
    client = redis_client
    fields = client.hgetall(record.traffic_key("many", HOUR))
    pipe = client.pipeline(transaction=False)
    for h in range(HOUR - 167, HOUR):
        pipe.hset(record.traffic_key("many", h), mapping=fields)
    pipe.execute()
    total = sum(
        client.memory_usage(record.traffic_key("many", h)) for h in range(HOUR - 167, HOUR + 1)
    )
    assert total <= 64 * 1024, total


def test_on_a_cluster_each_policy_s_hours_share_a_slot_and_read_back(backend, redis_client):
    from redis.cluster import key_slot

    names = ["search", "login", "upload"]
    for name in names:
        p = policy("fixed_window", 50, 3600, name=name)
        replay(p, "ip:203.0.113.7", 12)
        replay(p, "ip:203.0.113.9", 2)
    assert record.flush(now=NOW)
    for name in names:
        traffic = reading.read(redis_client, name, 168, NOW)
        assert (traffic.requests, traffic.at(1), traffic.at(2), traffic.at(10)) == (14, 2, 2, 1)
        slots = {key_slot(record.traffic_key(name, HOUR - h).encode()) for h in range(168)}
        assert len(slots) == 1
