"""token_bucket (GCRA): a steady rate with bursts, on exact timelines (explicit ``now``)
against the real script."""

from __future__ import annotations

import threading

import pytest

from ratelimits.conf import app_settings
from ratelimits.engine import limiter
from ratelimits.engine.keys import names as keys
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.store import connection
from ratelimits.tools import inspection, memory
from tests.helpers import IDENTITY, hit, policy

pytestmark = pytest.mark.usefixtures("backend")


def bucket(limit: int, window: int, burst: int | None = None, **fields: object) -> CompiledPolicy:
    return policy("token_bucket", limit=limit, window=window, burst=burst, **fields)


def test_limit_2_per_2s_with_bursts_of_4():
    """Four pass at once, the fifth waits one emission interval (1 s), then one passes."""
    p = bucket(limit=2, window=2, burst=4)
    assert [hit(p, 1000).remaining for _ in range(4)] == [3, 2, 1, 0]
    fifth = hit(p, 1000)
    assert not fifth.allowed
    assert fifth.retry_after == 1.0
    assert fifth.reset == 1.0
    assert not hit(p, 1000.999).allowed
    again = hit(p, 1001)
    assert again.allowed and again.remaining == 0
    assert not hit(p, 1001).allowed


def test_a_burst_then_the_steady_rate_with_exact_retry_times():
    """limit 10 per 10 s: one unit every second; bursts of 3."""
    p = bucket(limit=10, window=10, burst=3)
    for remaining in (2, 1, 0):
        assert hit(p, 5000).remaining == remaining
    for step in range(1, 6):
        at = 5000 + step
        early = hit(p, at - 0.25)
        assert not early.allowed
        assert early.retry_after == 0.25
        admitted = hit(p, at)
        assert admitted.allowed and admitted.remaining == 0
        assert admitted.reset == 1.0
        assert admitted.count == pytest.approx(2.0)  # units in the bucket before it


def test_a_long_idle_refills_to_the_burst_and_no_further():
    p = bucket(limit=5, window=60, burst=3)
    for _ in range(3):
        assert hit(p, 100).allowed
    assert not hit(p, 100).allowed
    later = [hit(p, 100_000) for _ in range(4)]
    assert [d.allowed for d in later] == [True, True, True, False]
    assert [d.remaining for d in later[:3]] == [2, 1, 0]
    assert later[3].retry_after == 12.0  # T = 60 / 5


def test_partial_refill_remaining_and_reset():
    """T = 1 s, burst 4: after 4 at once and 2.5 s, two units are free and the third
    frees 0.5 s later."""
    p = bucket(limit=1, window=1, burst=4)
    for _ in range(4):
        hit(p, 200)
    decision = hit(p, 202.5)
    assert decision.allowed
    assert decision.count == pytest.approx(1.5)
    assert decision.remaining == 1  # 1.5 + 1 in use of 4
    assert decision.reset == 0.5
    assert hit(p, 202.5).allowed
    denied = hit(p, 202.5)
    assert not denied.allowed and denied.retry_after == 0.5


def test_the_default_burst_is_the_limit():
    p = bucket(limit=3, window=30)
    assert [hit(p, 300).allowed for _ in range(4)] == [True, True, True, False]
    assert hit(p, 310).allowed  # one every 10 s
    assert not hit(p, 310).allowed


def test_a_non_integer_interval_admits_exactly_the_burst():
    """T = 1/3 s is not a whole number of microseconds: still exactly burst at once."""
    p = bucket(limit=3, window=1, burst=3)
    assert [hit(p, 400).allowed for _ in range(4)] == [True, True, True, False]
    assert [hit(p, 400 + i / 3).allowed for i in range(1, 31)] == [True] * 30


def test_the_key_is_one_small_string_that_expires_when_the_bucket_is_empty(redis_client):
    p = bucket(limit=10, window=60, burst=10)
    for _ in range(3):
        hit(p, 1_745_000_000)
    key = p.key_for(IDENTITY)
    assert redis_client.type(key) in (b"string", "string")
    assert int(float(redis_client.get(key))) == 1_745_000_000_000_000 + 3 * 6_000_000
    assert redis_client.memory_usage(key) <= 100
    # TTL: until the bucket is empty again (18 s after "now"; the test's now is in the past,
    # so Redis keeps it at most that long from its own clock).
    assert 0 < redis_client.pttl(key) <= 18_000


def test_concurrent_requests_admit_exactly_the_burst():
    """400 requests from 16 threads on the Redis clock, 50 per hour with bursts of 50."""
    p = bucket(limit=50, window=3600, burst=50)
    admitted = []
    lock = threading.Lock()

    def client() -> None:
        for _ in range(25):
            verdict = limiter.decide([limiter.Check(p, "ip:198.51.100.9")])
            with lock:
                admitted.append(verdict.allowed)

    threads = [threading.Thread(target=client) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(admitted) == 400
    assert sum(admitted) == 50


def test_shards_split_the_rate_and_the_burst():
    p = bucket(limit=10, window=10, burst=4, shards=2)
    assert p.capacities == (2, 2)
    assert [a[1] for a in p.script_args] == ["5", "5"]
    for shard in (0, 1):
        check = limiter.Check(p, IDENTITY, shard)
        decided = [limiter.decide([check], now=600).allowed for _ in range(3)]
        assert decided == [True, True, False]
    # A burst smaller than the shards asked for caps them: each shard holds a unit.
    assert bucket(limit=10, window=10, burst=3, shards=8).shards == 3


def test_an_override_keeps_the_burst_ratio_or_the_default():
    assert bucket(limit=10, window=60).with_limit(100, override="u").burst is None
    overridden = bucket(limit=10, window=60).with_limit(100, override="u")
    assert overridden.capacities == (100,)
    ratio = bucket(limit=10, window=60, burst=20).with_limit(100, override="u")
    assert ratio.burst == 200 and ratio.capacities == (200,)
    assert bucket(limit=10, window=60, burst=1).with_limit(3, override="u").burst == 1


@pytest.mark.parametrize("fields", [{"burst": 0}, {"cost": 0}, {"burst": -1}])
def test_build_rejects_a_burst_or_a_cost_below_1(fields):
    with pytest.raises(ValueError):
        bucket(limit=10, window=60, **fields)


def test_from_model_reads_burst_and_cost_when_the_row_has_them():
    class Row:
        name, endpoint, algorithm, limit, window = "b", "x", "token_bucket", 10, 60
        key, methods, mode, fail_open, shards = "ip", "", "enforce", True, 1

    assert CompiledPolicy.from_model(Row()).burst is None
    Row.burst, Row.cost = 25, 2  # type: ignore[attr-defined]
    compiled = CompiledPolicy.from_model(Row())
    assert (compiled.burst, compiled.cost, compiled.capacities) == (25, 2, (25,))


def test_the_tools_read_a_bucket_key(redis_client):
    p = bucket(limit=10, window=60)
    limiter.decide([limiter.Check(p, IDENTITY)])
    name = keys.parse_key(p.key_for(IDENTITY), app_settings.KEY_PREFIX)
    assert name is not None and name.algorithm == "token_bucket"
    detail = inspection.inspect(connection.get_client(), name, {p.name: p})
    assert detail.exists and int(float(detail.raw["tat"])) > detail.now_us
    assert detail.decision is not None and detail.decision.remaining == 8
    assert memory.bytes_per_client("token_bucket", 10) == memory.BUCKET_BYTES
