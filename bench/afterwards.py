"""After the response, in process: what a concurrency slot and ``counts`` cost a request.

Each contender handles a request from one of 1,000 clients (every one under its limit)
with one policy, through the engine as every face does: ``decide``, then, after the
response, ``give_back`` with that response's status. Measured per request, with the
Redis calls it made (``INFO commandstats``: ``FCALL``/``EVALSHA``/``EVAL``):

- ``sliding_log``, counts all: one call, nothing to give back (the baseline);
- ``sliding_log``, counts failures, a failed response: one call (spent, nothing back);
- ``sliding_log``, counts failures, a successful response: two calls (given back);
- ``concurrency``: two calls (the slot taken, then given back);
- the anchor, in the same run: the ``limits`` library's moving window ``hit()``
  (``RedisStorage`` on the same server), and a ``PING``, the round trip's floor.

The contenders take turns within each run, so load from elsewhere falls on all alike.
In a real server the give-back runs after the response is sent: it costs the worker
this time, not the client.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.common import (
    DECIDE_COMMANDS,
    Context,
    Section,
    command_delta,
    command_stats,
    contenders_table,
)

LIMIT = 1_000_000
WINDOW = 3600
CLIENTS = 1000
BASELINE = "sliding_log, counts all"
LIMITS_HIT = "limits moving window hit()"


@dataclass(frozen=True)
class Contender:
    """One way of handling the ``i``-th request, as ``step(i)``."""

    label: str
    step: Callable[[int], object]


def contenders(ctx: Context) -> list[Contender]:
    from limits import RateLimitItemPerHour
    from limits.storage import RedisStorage
    from limits.strategies import MovingWindowRateLimiter

    from ratelimits.engine import limiter
    from ratelimits.engine.policy.compiled import Check, CompiledPolicy

    def compiled(name: str, algorithm: str, counts: str = "all") -> CompiledPolicy:
        return CompiledPolicy.build(
            name=name, endpoint=name, algorithm=algorithm, limit=LIMIT, window=WINDOW,
            counts=counts,
        )  # fmt: skip

    def request(policy: CompiledPolicy, status: int) -> Callable[[int], object]:
        def step(i: int) -> None:
            verdict = limiter.decide([Check(policy, f"ip:10.200.{i % CLIENTS // 250}.{i % 250}")])
            if verdict.receipt is not None:
                limiter.give_back(verdict.receipt, status)

        return step

    counted = compiled("bench-all", "sliding_log")
    failures = compiled("bench-failures", "sliding_log", counts="failures")
    slots = compiled("bench-slots", "concurrency")
    moving = MovingWindowRateLimiter(RedisStorage(ctx.redis.url))
    item = RateLimitItemPerHour(LIMIT)
    ping = ctx.client()
    return [
        Contender(BASELINE, request(counted, 200)),
        Contender("sliding_log, counts failures, a failure (spent)", request(failures, 401)),
        Contender("sliding_log, counts failures, a success (given back)", request(failures, 200)),
        Contender("concurrency (slot taken, given back)", request(slots, 200)),
        Contender(LIMITS_HIT, lambda i: moving.hit(item, "bench", str(i % CLIENTS))),
        Contender("PING", lambda i: ping.ping()),
    ]


def run(ctx: Context) -> Section:
    lineup = contenders(ctx)
    requests = ctx.scaled(4000, 40)
    for contender in lineup:  # warm-up: connections, code loaded, every client's key made
        for i in range(ctx.scaled(CLIENTS, 10)):
            contender.step(i)
    times: dict[str, list[float]] = {c.label: [] for c in lineup}
    calls: dict[str, float] = {}
    with ctx.client() as client:
        for _ in range(ctx.runs):
            for contender in lineup:
                gc.collect()
                before = command_stats(client)
                started = time.perf_counter()
                for i in range(requests):
                    contender.step(i)
                elapsed = time.perf_counter() - started
                delta = command_delta(before, command_stats(client))
                times[contender.label].append(elapsed / requests * 1e6)
                calls[contender.label] = sum(delta.get(n, 0) for n in DECIDE_COMMANDS) / requests
    title = "After the response: concurrency and counts (in process)"
    return Section(title, describe(times, calls))


def describe(times: dict[str, list[float]], calls: dict[str, float]) -> str:
    table = contenders_table(
        "per request",
        times,
        calls,
        baseline=BASELINE,
        anchor=LIMITS_HIT,
        uncounted=(LIMITS_HIT, "PING"),
    )
    return (
        f"{table}\n\n"
        f"1,000 clients, one policy of {LIMIT:,} per {WINDOW} s (never reached), on one "
        "Redis server; each figure is the median of the runs, each run "
        "the mean over its requests. `decide calls` are the decide function's calls Redis "
        "counted per request: the give-back is the second one, made only after a "
        "response that does not count and for every concurrency request. On a server "
        "it is made after the response is sent (see docs/after-response.md)."
    )
