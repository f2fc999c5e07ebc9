"""compact_log decides exactly as sliding_log, reply for reply, on seeded traces.

Each trace is a few thousand requests at explicit times: steady Poisson traffic at rates
around the limit, rates that switch between low and high, bursts that straddle window
boundaries, several requests at one microsecond, and (in the second test) limits edited
mid-trace (a new policy of the same name, as an admin edit compiles). Both algorithms
replay it through one pipeline each, in time order, so every decision is the one a live
request would get; every field of every decision, and of the script's reply, must agree.
(``tests/engine/test_compact_log.py`` replays short hypothesis-drawn timelines; these are
long and bursty.)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from ratelimits.engine import limiter
from ratelimits.engine.decision import Decision
from ratelimits.engine.keys import names as keys
from ratelimits.testing.replay import queue_decide
from tests.helpers import policy

pytestmark = pytest.mark.skipif(
    "compact_log" not in keys.ALGORITHM_SUFFIX, reason="compact_log is not in this build"
)

WINDOW = 10
START = 1_750_000_000  # a multiple of WINDOW: boundaries at START + k * WINDOW
DURATION = 12 * WINDOW


@dataclass(frozen=True)
class Request:
    now: float
    identity: str
    limit: int


def poisson(rng: random.Random, rate: float, start: float, end: float) -> list[float]:
    times, t = [], start + rng.expovariate(rate)
    while t < end:
        times.append(t)
        t += rng.expovariate(rate)
    return times


def client_times(rng: random.Random, kind: str, limit: int) -> list[float]:
    """Seconds after START at which one client sends."""
    per_second = limit / WINDOW
    if kind == "steady":
        return poisson(rng, rng.choice((0.5, 0.9, 1.0, 1.2, 2.0, 4.0)) * per_second, 0, DURATION)
    if kind == "switching":
        times, t, high = [], 0.0, False
        while t < DURATION:
            length = rng.uniform(2, 25)
            rate = (3.0 if high else 0.3) * per_second
            times += poisson(rng, rate, t, min(DURATION, t + length))
            t, high = t + length, not high
        return times
    # Bursts just before and just after window boundaries, some at one microsecond.
    times = poisson(rng, 0.3 * per_second, 0, DURATION)
    for boundary in range(WINDOW, DURATION, WINDOW):
        if rng.random() < 0.8:
            spread = rng.uniform(0.05, 1.5)
            for side in (-1, 1):
                count = round(limit * rng.uniform(0.5, 1.5))
                times += [boundary + side * rng.uniform(0, spread) for _ in range(count)]
            times += [boundary - 0.000001] * rng.randint(1, 3)
    return times


def make_trace(seed: int, *, clients: int, edits: bool) -> list[Request]:
    """Requests in time order; with ``edits``, each client's limit changes mid-trace."""
    rng = random.Random(seed)
    requests = []
    for index in range(clients):
        kind = ("steady", "switching", "bursts")[index % 3]
        base = rng.choice((1, 3, 5, 10, 25))
        # The limit in force from each time on: lowered and raised, some several times.
        schedule = [(0.0, base)]
        if edits:
            for at in sorted(rng.uniform(5, DURATION - 5) for _ in range(rng.randint(1, 4))):
                schedule.append((at, max(1, round(base * rng.choice((0.3, 0.5, 2.0, 4.0))))))
        for t in client_times(rng, kind, base):
            limit = [limit for start, limit in schedule if start <= t][-1]
            requests.append(Request(round(START + t, 6), f"ip:10.0.0.{index}", limit))
    requests.sort(key=lambda r: r.now)
    return requests


def replay(
    redis_client, algorithm: str, requests: list[Request]
) -> list[tuple[Decision, tuple[int, ...]]]:
    """Each request decided by ``algorithm`` (one pipeline, in order): the decision and
    the script's raw fields for it (with ``blocked_us``, which no decision shows)."""
    checks = [
        [limiter.Check(policy(algorithm, limit=r.limit, window=WINDOW), r.identity)]
        for r in requests
    ]
    pipe = redis_client.pipeline(transaction=False)
    for r, check in zip(requests, checks, strict=True):
        queue_decide(check, pipe, now=r.now)
    replies = pipe.execute()
    return [
        (limiter.verdict_from(check, reply)[1].decisions[0], tuple(reply[2:]))
        for check, reply in zip(checks, replies, strict=True)
    ]


def fields(decided: tuple[Decision, tuple[int, ...]]) -> tuple[object, ...]:
    decision, raw = decided
    return (
        decision.allowed,
        decision.count,
        decision.remaining,
        decision.retry_after,
        decision.reset,
        decision.limit,
        raw,
    )


def assert_same_decisions(redis_client, requests: list[Request]) -> None:
    exact = replay(redis_client, "sliding_log", requests)
    compact = replay(redis_client, "compact_log", requests)
    differing = [
        (i, requests[i], fields(a), fields(b))
        for i, (a, b) in enumerate(zip(exact, compact, strict=True))
        if fields(a) != fields(b)
    ]
    assert differing == [], f"{len(differing)} of {len(requests)} differ, first: {differing[:3]}"
    admitted = sum(decision.allowed for decision, _ in exact)
    assert 0 < admitted < len(requests)  # the trace both admits and denies


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_compact_log_decides_as_sliding_log(redis_client, seed):
    requests = make_trace(seed, clients=24, edits=False)
    assert len(requests) > 1500
    assert_same_decisions(redis_client, requests)


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_compact_log_decides_as_sliding_log_across_limit_edits(redis_client, seed):
    requests = make_trace(seed, clients=24, edits=True)
    assert len(requests) > 1500
    assert len({(r.identity, r.limit) for r in requests}) > 24  # limits did change
    assert_same_decisions(redis_client, requests)
