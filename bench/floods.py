"""Floods cost Redis nothing: script calls per denied request for one client flooding at
10x its limit, with the worker's remembered denials (``ratelimits.denials``) and without
(``LOCAL_DENIALS`` 0), per algorithm.

Two floods, through ``limiter.decide`` on the Redis clock (as ``PolicyThrottle`` calls
it):

- **sustained**: paced at 10 x limit per window for several windows (window 2 s, limit
  20: 100 requests a second for 6 s);
- **burst**: 10 x limit requests at once, within one window.

Calls come from ``INFO commandstats`` (decide calls that ran: ``fcall``, or ``evalsha``
 and ``eval`` on a server without Functions). Every admitted
request costs exactly one call, so the calls for denied requests are the total less the
admissions.
"""

from __future__ import annotations

import time
from typing import Any

from django.test import override_settings

from bench.common import DECIDE_COMMANDS, Context, Section, Target, markdown_table
from ratelimits.engine import limiter
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.testutils import reset_state

ALGORITHMS = ("sliding_log", "compact_log", "sliding_counter", "fixed_window")
TARGET = 0.01


def script_calls(ctx: Context) -> int:
    """Decide calls that ran: ``FCALL`` (Redis 7+) or the script (``EVALSHA``, ``EVAL``)."""
    rows = command_stats_rows(ctx)
    return sum(
        int(row.get("calls", 0)) - int(row.get("failed_calls", 0))
        for row in (rows.get(name, {}) for name in DECIDE_COMMANDS)
    )


def command_stats_rows(ctx: Context) -> dict[str, dict[str, Any]]:
    stats = ctx.client().info("commandstats")
    return {name.removeprefix("cmdstat_"): row for name, row in stats.items()}


def flood(
    ctx: Context, algorithm: str, *, limit: int, window: int, seconds: float, rate: float
) -> dict[str, float]:
    """Send ``rate`` requests a second for ``seconds`` (0: all at once, ``10 x limit``)
    from one client; returns admitted, denied, calls and calls per denied request."""
    reset_state()
    ctx.client().flushall()
    policy = CompiledPolicy.build(
        name=f"flood-{algorithm}",
        endpoint="flood",
        algorithm=algorithm,
        limit=limit,
        window=window,
        key="ip",
    )
    check = [limiter.Check(policy, "ip:198.51.100.77")]
    limiter.decide([limiter.Check(policy, "ip:198.51.100.1")])  # the script is loaded
    before = script_calls(ctx)
    admitted = denied = 0
    total = int(seconds * rate) if seconds else 10 * limit
    started = time.monotonic()
    for n in range(total):
        if seconds:
            delay = started + n / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        if limiter.decide(check).allowed:
            admitted += 1
        else:
            denied += 1
    calls = script_calls(ctx) - before
    return {
        "admitted": admitted,
        "denied": denied,
        "calls": calls,
        "per_denied": (calls - admitted) / denied if denied else 0.0,
    }


def run(ctx: Context) -> Section:
    window = 1 if ctx.quick else 2
    limit = 20
    seconds = 2.0 if ctx.quick else 6.0
    rate = 10 * limit / window
    rows = []
    targets = []
    for algorithm in ALGORITHMS:
        results = {}
        for label, local in (("remembered", 10_000), ("off", 0)):
            with override_settings(RATELIMITS={"LOCAL_DENIALS": local}):
                results[("sustained", label)] = flood(
                    ctx, algorithm, limit=limit, window=window, seconds=seconds, rate=rate
                )
                results[("burst", label)] = flood(
                    ctx, algorithm, limit=limit, window=3600, seconds=0, rate=0
                )
        for shape in ("sustained", "burst"):
            on, off = results[(shape, "remembered")], results[(shape, "off")]
            rows.append(
                [
                    algorithm,
                    shape,
                    f"{on['admitted']:.0f} / {on['denied']:.0f}",
                    f"{on['calls']:.0f}",
                    f"**{on['per_denied']:.4f}**",
                    f"{off['calls']:.0f}",
                    f"{off['per_denied']:.2f}",
                ]
            )
            targets.append(
                Target(
                    f"Redis calls per denied request, {algorithm}, {shape} flood at 10x",
                    f"{on['per_denied']:.4f} (without: {off['per_denied']:.2f})",
                    f"<= {TARGET}",
                    on["per_denied"] <= TARGET,
                )
            )
    reset_state()
    body = "\n\n".join(
        [
            __doc__.split("\n\n", 1)[1].strip(),
            f"Limit {limit}; sustained: window {window} s, {rate:.0f} requests/s for "
            f"{seconds:.0f} s; burst: {10 * limit} requests at once, window 3600 s.",
            markdown_table(
                [
                    "algorithm",
                    "flood",
                    "admitted / denied",
                    "calls (remembered)",
                    "calls per denied (remembered)",
                    "calls (off)",
                    "calls per denied (off)",
                ],
                rows,
            ),
            "With denials remembered, an admission that uses the last unit of quota tells "
            "the worker how long the key stays full, so even the first denied request of a "
            "flood costs no call: the calls are the admissions.",
        ]
    )
    return Section("Floods: Redis calls per denied request", body, targets)
