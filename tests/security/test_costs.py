"""Red team: costs that cannot hurt Redis (issue 32, "Under attack, it still limits").

A view's cost comes from the request (``ratelimit_cost``, here ``?rows=``). Before, the
logs kept one sorted-set member (or 8 ring bytes) per unit: one admitted request of cost
1,000,000 kept Redis busy for over a second and left a key of 118 MB, and every other
worker's call timed out. Now a request is one entry whatever its cost, and a cost above
``RATELIMITS["MAX_COST"]`` is refused (the policies' own costs apply), logged once.

The work is Redis's own: the microseconds ``INFO commandstats`` counts for the decide
calls (FCALL on Redis 7, EVALSHA on 6.2) on the real server, and ``MEMORY USAGE`` of
every key; nothing here times Python.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ratelimits.engine import limiter
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.http import request_facts
from ratelimits.testing.replay import queue_decide
from tests.helpers import IDENTITY, create_policy, policy, ratelimits_settings

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.urls")]

ALGORITHMS = [
    "sliding_log",
    "compact_log",
    "sliding_counter",
    "fixed_window",
    "token_bucket",
    "concurrency",
]
HEAVY = 1_000_000
LIMIT = 1_500_000
#: A day: the counters' windows do not roll during a test.
WINDOW = 86_400
#: The most Redis may spend on the heavy request's calls (decide, and give-back).
BUSY_US = 5_000
KEY_BYTES = 16 * 1024
DECIDE_COMMANDS = ("fcall", "evalsha", "eval")


def decide_usec(redis_client: Any) -> tuple[int, int]:
    """(microseconds, calls) of the decide calls since the last CONFIG RESETSTAT."""
    stats = redis_client.info("commandstats")
    rows = [row for name, row in stats.items() if name.removeprefix("cmdstat_") in DECIDE_COMMANDS]
    return sum(int(row["usec"]) for row in rows), sum(int(row["calls"]) for row in rows)


def key_sizes(redis_client: Any) -> dict[bytes, int]:
    return {
        key: redis_client.memory_usage(key, samples=0) for key in redis_client.scan_iter("rl:{*")
    }


def rows(client: Any, n: int, address: str = "198.51.100.7") -> Any:
    return client.get("/export/rows/", {"rows": str(n)}, REMOTE_ADDR=address)


def remaining(response: Any) -> int:
    return int(response["RateLimit"].split(";r=")[1].split(";")[0])


def admit(
    redis_client: Any, p: CompiledPolicy, requests: int, *, start: float, step: float
) -> None:
    """Send ``requests`` admissions of ``p``'s client, ``step`` seconds apart from ``start``
    on a fixed clock, in one pipeline; each must be admitted."""
    pipe = redis_client.pipeline(transaction=False)
    for i in range(requests):
        queue_decide([limiter.Check(p, IDENTITY)], pipe, now=start + i * step)
    assert all(reply[0] == 1 for reply in pipe.execute())


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_cost_of_a_million_is_cheap_for_redis_and_decided_right(
    algorithm, client, settings, redis_client
):
    settings.RATELIMITS = ratelimits_settings(MAX_COST=10 * HEAVY)
    burst = {"burst": LIMIT} if algorithm == "token_bucket" else {}
    create_policy(
        "exports", "export", algorithm=algorithm, limit=LIMIT, window=WINDOW, key="ip", **burst
    )
    assert rows(client, 1, address="198.51.100.200").status_code == 200  # code loaded, warm
    redis_client.config_resetstat()

    heavy = rows(client, HEAVY)

    usec, calls = decide_usec(redis_client)
    assert heavy.status_code == 200
    assert remaining(heavy) == LIMIT - HEAVY
    assert calls == (2 if algorithm == "concurrency" else 1)  # decide (and give-back)
    assert usec < BUSY_US, f"Redis spent {usec} us on one request of cost {HEAVY}"
    sizes = key_sizes(redis_client)
    assert max(sizes.values(), default=0) < KEY_BYTES, sizes

    # The next requests are decided right: the million is counted as a million.
    if algorithm == "concurrency":  # units in progress: given back with the response
        assert rows(client, HEAVY).status_code == 200
        assert rows(client, LIMIT).status_code == 200
        assert not any(b":exports:" in key for key in key_sizes(redis_client))
        # Held (a response not finished yet): one lease, small; the rest is refused.
        p = policy("concurrency", limit=LIMIT, window=60)
        held = limiter.decide([limiter.Check(p, IDENTITY, cost=HEAVY)])
        assert held.allowed
        assert redis_client.memory_usage(p.key_for(IDENTITY), samples=0) < KEY_BYTES
        assert not limiter.decide([limiter.Check(p, IDENTITY, cost=LIMIT - HEAVY + 1)]).allowed
        limiter.give_back(held.receipt, 200)
        assert limiter.decide([limiter.Check(p, IDENTITY, cost=LIMIT)]).allowed
        return
    again = rows(client, HEAVY)
    assert again.status_code == 429 and int(again["Retry-After"]) >= 1
    assert rows(client, 400_000).status_code == 200
    assert rows(client, 200_000).status_code == 429
    usec, calls = decide_usec(redis_client)
    assert usec < calls * BUSY_US
    assert max(key_sizes(redis_client).values()) < KEY_BYTES


@pytest.mark.parametrize("algorithm", ["sliding_log", "compact_log"])
def test_a_denied_heavy_request_on_a_long_log_searches_it_not_reads_it(algorithm, redis_client):
    """20,000 admissions of one unit, then requests of cost 15,000 denied: each finds when
    enough units leave by binary search (O(log n) commands), where reading the log costs
    a millisecond or more."""
    p = policy(algorithm, limit=20_000, window=3600)
    admit(redis_client, p, 20_000, start=5000, step=0.001)
    redis_client.config_resetstat()
    for i in range(50):
        denied = limiter.decide([limiter.Check(p, IDENTITY, cost=15_000)], now=5030 + i).decisions[
            0
        ]
        # 15,000 units must leave: the 15,000th admission, at 5014.999, then the window.
        assert not denied.allowed and denied.retry_after == pytest.approx(3600 - 15.001 - i)
    usec, calls = decide_usec(redis_client)
    assert calls == 50 and usec / calls < 300, f"{usec / calls:.0f} us a denied request"


def test_compact_log_at_limit_a_million_does_bounded_work_per_request(redis_client):
    """Before, every request read and rewrote the whole ring (GET + SET of 8 bytes x its
    entries: 3.5 ms at 100,000). Now a request reads O(log n) slots and writes one."""
    p = policy("compact_log", limit=1_000_000, window=3600)
    key = p.key_for(IDENTITY)
    admit(redis_client, p, 50_000, start=5000, step=0.0001)
    redis_client.config_resetstat()
    admit(redis_client, p, 200, start=5010, step=0.01)
    usec, calls = decide_usec(redis_client)
    assert calls == 200 and usec / calls < 300, f"{usec / calls:.0f} us a request"
    assert limiter.decide([limiter.Check(p, IDENTITY)], now=5020).decisions[0].count == 50_200
    assert redis_client.strlen(key) <= 16 + 16 * 2 * 50_200  # 16 B a request, doubling


def test_a_cost_above_max_cost_is_refused_and_logged_once(client, settings, caplog):
    settings.RATELIMITS = ratelimits_settings(MAX_COST=1000)
    request_facts._max_cost.clear()
    create_policy("exports", "export", algorithm="sliding_log", limit=100, window=60, key="ip")
    with caplog.at_level(logging.WARNING, logger="ratelimits"):
        answers = [rows(client, 5_000_000, address="198.51.100.9") for _ in range(30)]
    # Each was charged the policy's own cost (1), not refused with a 500 nor a 429.
    assert [a.status_code for a in answers] == [200] * 30
    assert [remaining(a) for a in answers] == list(range(99, 69, -1))
    lines = [r.getMessage() for r in caplog.records if "MAX_COST" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "5000000" in lines[0] and "1000" in lines[0] and "export" in lines[0]
    # A cost at MAX_COST is a cost: spent.
    assert rows(client, 1000, address="198.51.100.10").status_code == 429  # 1000 > 100
    ok = rows(client, 60, address="198.51.100.11")
    assert (ok.status_code, remaining(ok)) == (200, 40)


def test_a_log_that_left_the_window_at_once_is_trimmed_a_little_per_request(redis_client):
    """20,000 entries leave the window together: the next admissions each remove at most
    256 of them (one long ZREMRANGEBYSCORE would hold Redis for the whole log), and the
    counts are right meanwhile."""
    p = policy("sliding_log", limit=20_000, window=60)
    key = p.key_for(IDENTITY)
    admit(redis_client, p, 20_000, start=5000, step=0.0001)
    redis_client.config_resetstat()
    decisions = [
        limiter.decide([limiter.Check(p, IDENTITY)], now=5100 + i).decisions[0] for i in range(3)
    ]
    assert [(d.allowed, d.count) for d in decisions] == [(True, 0), (True, 1), (True, 2)]
    assert redis_client.zcard(key) == 20_000 - 3 * 256 + 3
    usec, calls = decide_usec(redis_client)
    assert calls == 3 and usec / calls < 1000, f"{usec / calls:.0f} us a request"
