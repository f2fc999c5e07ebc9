"""Floods cost Redis nothing: a worker denies an over-limit key itself until Redis's own
retry time, and forgets it when counters are reset or a policy changes."""

from __future__ import annotations

import time

import pytest

from ratelimits.engine import denials, limiter
from ratelimits.engine.table import current as table
from ratelimits.models import Policy
from ratelimits.tools import inventory
from tests.helpers import IDENTITY, decide_calls, policy, start_worker, worker_line

ALGORITHMS = ["sliding_log", "compact_log", "sliding_counter", "fixed_window"]
#: Seconds a test waits for what it expects before it fails: far beyond what even a loaded
#: machine takes.
WAIT = 30.0


def request(p, identity: str = IDENTITY):
    return limiter.decide([limiter.Check(p, identity)])


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_flood_at_10x_the_limit_costs_one_call_per_admission(algorithm, redis_client):
    p = policy(algorithm, limit=10, window=3600)
    before = decide_calls(redis_client)
    verdicts = [request(p) for _ in range(100)]
    admitted = [v for v in verdicts if v.allowed]
    assert len(admitted) == 10
    # The 10th admission used the last unit: Redis said so, and the flood stays local.
    assert decide_calls(redis_client) - before == 10
    denied = [v.decisions[0] for v in verdicts if not v.allowed]
    assert all(d.cached and not d.allowed and d.remaining == 0 for d in denied)
    assert all(0 < d.retry_after <= 2 * 3600 for d in denied)  # the counter may wait > w
    assert denied[0].count == 10 and denied[0].limit == 10


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_local_denial_ends_when_redis_would_admit_again(algorithm, redis_client):
    """Window 1 s, limit 2: denied locally for at most Redis's wait, then admitted."""
    p = policy(algorithm, limit=2, window=1)
    # The first three requests in one window (of a clock-aligned algorithm): a slow
    # machine may see the window turn between them, and then tries again on a fresh key.
    for attempt in range(20):
        identity = f"ip:198.51.100.{attempt}"
        if algorithm in ("fixed_window", "sliding_counter"):
            while time.time() % 1 > 0.5:  # clear of a window boundary
                time.sleep(0.01)
        window = int(time.time())
        admitted = [request(p, identity).allowed for _ in range(2)]
        sent = time.monotonic()
        first = request(p, identity).decisions[0]
        if int(time.time()) == window or algorithm not in ("fixed_window", "sliding_counter"):
            break
    assert admitted == [True, True]
    assert not first.allowed and first.cached
    while not request(p, identity).allowed:
        assert time.monotonic() - sent < WAIT, f"still denied {WAIT} s later"
        time.sleep(0.002)
    # The first admission after the flood came from Redis, at or after its retry time.
    assert time.monotonic() - sent >= first.retry_after - 0.005


def test_a_denial_by_redis_is_remembered_for_its_retry_time(redis_client):
    p = policy("sliding_log", limit=2, window=60)
    for _ in range(2):
        assert request(p).allowed
    denials.clear()  # forget the admission's hint: the next denial comes from Redis
    from_redis = request(p).decisions[0]
    assert not from_redis.allowed and not from_redis.cached
    local = request(p).decisions[0]
    assert local.cached and local.retry_after <= from_redis.retry_after


def test_only_enforcing_policies_deny_locally(redis_client):
    shadow = policy("sliding_log", limit=1, window=60, name="shadow", mode="shadow")
    before = decide_calls(redis_client)
    verdicts = [request(shadow) for _ in range(5)]
    assert all(v.allowed for v in verdicts)
    assert decide_calls(redis_client) - before == 5
    assert denials.size() == 0


def test_a_request_denied_by_another_policy_does_not_use_the_last_unit(redis_client):
    """Only a recorded admission says a key is full: here nothing was recorded."""
    strict = policy("sliding_log", limit=1, window=60, name="strict")
    loose = policy("sliding_log", limit=1, window=60, name="loose")
    assert request(strict, "ip:198.51.100.1").allowed  # strict is now full for that client
    verdict = limiter.decide(
        [limiter.Check(strict, "ip:198.51.100.1"), limiter.Check(loose, "ip:198.51.100.1")]
    )
    assert not verdict.allowed
    assert request(loose, "ip:198.51.100.1").allowed  # loose was not consumed, nor cached


def test_replayed_timelines_never_use_the_cache(redis_client):
    p = policy("sliding_log", limit=1, window=60)
    assert limiter.decide([limiter.Check(p, IDENTITY)], now=100).allowed
    assert denials.size() == 0
    assert limiter.decide([limiter.Check(p, IDENTITY)], now=200).allowed


def test_a_reset_in_this_process_frees_the_client_at_once(redis_client):
    p = policy("sliding_log", limit=2, window=3600, name="login")
    for _ in range(5):
        request(p)
    assert request(p).decisions[0].cached
    assert inventory.reset(redis_client, "login", IDENTITY) == 1
    assert request(p).allowed


def test_the_memory_is_bounded(settings, redis_client):
    settings.RATELIMITS = {**getattr(settings, "RATELIMITS", {}), "LOCAL_DENIALS": 3}
    p = policy("sliding_log", limit=1, window=3600)
    for i in range(10):
        request(p, f"ip:198.51.100.{i}")
        assert denials.size() <= 3
    settings.RATELIMITS = {**settings.RATELIMITS, "LOCAL_DENIALS": 0}
    denials.clear()
    before = decide_calls(redis_client)
    for _ in range(3):
        assert not request(p, "ip:198.51.100.1").allowed
    assert decide_calls(redis_client) - before == 3  # off: every request asks Redis


def test_a_reply_from_before_a_reset_is_not_remembered(redis_client):
    p = policy("sliding_log", limit=1, window=3600)
    check = limiter.Check(p, IDENTITY)
    assert request(p).allowed
    denials.clear()
    seen = denials.generation()
    decision = limiter.decide([check], record=False).decisions[0]
    denials.clear()  # a reset landed while the reply was on its way
    denials.remember(check, decision, 60.0, time.monotonic(), seen)
    assert denials.size() == 0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("change", ["reset", "raised limit"])
def test_another_worker_lets_the_client_in_within_the_bound(change, redis_client):
    """A worker process floods; while it denies locally Redis sees no script call; a reset
    or a raised limit from this process frees the client there within the bound."""
    policy_row = Policy.objects.create(
        name="search", endpoint="/api/search/", algorithm="sliding_log", limit=3, window=3600
    )
    worker = start_worker("flood", "/api/search/", "30")
    try:
        assert worker_line(worker) == ["denied"]
        before = decide_calls(redis_client)
        time.sleep(0.5)  # about 300 requests from the worker
        assert decide_calls(redis_client) - before == 0
        if change == "reset":
            assert inventory.reset(redis_client, "search") == 1
        else:
            policy_row.limit = 10
            policy_row.save()
        # Let in through the first of the worker's stamp checks after the change.
        line = worker_line(worker, time.monotonic())
        assert line[0] == "admitted", line
    finally:
        worker.kill()
        worker.wait()


def test_a_remembered_denial_holds_while_redis_is_down(redis_server, settings):
    """Redis's answer stands through an outage; clients it had not denied get the fail
    mode (open here)."""
    p = policy("sliding_log", limit=1, window=3600, fail_open=True)
    assert request(p, "ip:198.51.100.1").allowed
    assert not request(p, "ip:198.51.100.1").allowed
    redis_server.kill()
    try:
        held = request(p, "ip:198.51.100.1").decisions[0]
        assert held.cached and not held.allowed and not held.failed
        other = request(p, "ip:198.51.100.2").decisions[0]
        assert other.failed and other.allowed
    finally:
        redis_server.start()


@pytest.mark.django_db
def test_redis_losing_its_data_frees_remembered_clients_within_the_bound(
    redis_server, redis_client
):
    """The policy table's stamp goes with the data; its absence reads as a change."""
    p = policy("sliding_log", limit=1, window=3600)
    table.get_table()  # the worker holds the stamp (written if missing)
    assert request(p).allowed
    assert request(p).decisions[0].cached
    redis_server.restart()
    assert request(p).decisions[0].cached  # not seen yet
    time.sleep(float(table.app_settings.POLICY_REFRESH_INTERVAL) + 0.1)
    table.get_table()  # a request's periodic check
    assert request(p).allowed
