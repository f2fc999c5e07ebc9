"""Latency percentiles of the time each limiter adds to a request, in process.

Every request goes through Django's full handler as in :mod:`bench.overhead` (its
contenders, views, policies and client rotation), but each request is timed on its own:
p50, p90, p99 and p99.9 of a contender's times, minus the same percentile of the
unthrottled view's times in the same run, is the time it adds at that percentile. For
each algorithm, one ``PolicyThrottle`` policy keyed by IP; against DRF's
``AnonRateThrottle`` and the ``limits`` library's moving window on the same Redis.

The contenders take turns in :data:`ROUNDS` rounds per run (the order rotating), so
that drift and other work on the machine hit them alike; the percentiles pool a run's
requests, and each figure is the median over ``ctx.runs`` runs. One cell: limit
:data:`LIMIT` per hour, :data:`CLIENTS` clients in turn, every request admitted.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence

from bench.common import Context, Section, markdown_table, median
from bench.overhead import (
    Clients,
    Contender,
    InProcess,
    algorithms,
    flush_counts,
    install,
    uninstall,
)
from bench.overhead import contenders as all_contenders

LIMIT = 1000
CLIENTS = 1000
#: The percentiles published.
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
#: Rounds per run; each contender sends its share of a run's requests in each.
ROUNDS = 20
#: Clients' addresses start here (an offset from 10.0.0.0), apart from other sections'.
FIRST_CLIENT = 8 << 20


def contenders() -> list[Contender]:
    """The unthrottled view first, then one policy of each algorithm, DRF's
    ``AnonRateThrottle`` and the ``limits`` moving window."""
    wanted = {"unthrottled DRF view", "DRF AnonRateThrottle", "limits moving window"}
    return [
        c for c in all_contenders() if c.label in wanted or (c.kind == "policy" and c.policies == 1)
    ]


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``ordered`` (sorted), nearest rank."""
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def timed(client: InProcess, environs: Sequence[dict]) -> list[float]:
    """Microseconds each of ``environs`` took; raises unless every answer is 200."""
    from django.core.handlers.wsgi import WSGIRequest

    get_response = client.handler.get_response
    found = []
    for environ in environs:
        started = time.perf_counter()
        status = get_response(WSGIRequest(dict(environ))).status_code
        found.append((time.perf_counter() - started) * 1e6)
        if status != 200:
            raise RuntimeError(f"{environ['PATH_INFO']}: answered {status}, not 200")
    return found


def measure(ctx: Context, requests: int) -> dict[str, list[list[float]]]:
    """``{label: [each run's percentiles (µs, as PERCENTILES)]}`` of every contender's
    own times per request (the unthrottled view's included)."""
    client = InProcess()
    chosen = contenders()
    flush_counts(ctx)
    pools = {c.label: Clients(CLIENTS, LIMIT, FIRST_CLIENT) for c in chosen}
    for contender in chosen:  # warm-up
        client.send(client.environs(contender.url(LIMIT), pools[contender.label].take(200)))
    share = max(1, requests // ROUNDS)
    found: dict[str, list[list[float]]] = {c.label: [] for c in chosen}
    turn = 0
    for _ in range(ctx.runs):
        samples: dict[str, list[float]] = {c.label: [] for c in chosen}
        gc.collect()
        gc.freeze()
        for _ in range(ROUNDS):
            turn += 1
            for contender in (*chosen[turn % len(chosen) :], *chosen[: turn % len(chosen)]):
                environs = client.environs(contender.url(LIMIT), pools[contender.label].take(share))
                samples[contender.label] += timed(client, environs)
        gc.unfreeze()
        for label, times in samples.items():
            times.sort()
            found[label].append([percentile(times, q) for q in PERCENTILES])
    return found


def _name(q: float) -> str:
    return f"p{q:g}"


def run(ctx: Context) -> Section:
    requests = ctx.scaled(10_000, 200)
    install([LIMIT], algorithms())
    try:
        found = measure(ctx, requests)
    finally:
        uninstall()
    labels = list(found)
    base_label = labels[0]
    base = found[base_label]
    own = {
        label: [median(run[i] for run in runs) for i in range(len(PERCENTILES))]
        for label, runs in found.items()
    }
    added = {
        label: [
            median(run[i] - b[i] for run, b in zip(runs, base, strict=True))
            for i in range(len(PERCENTILES))
        ]
        for label, runs in found.items()
        if label != base_label
    }
    rows = [[f"{base_label} (its own time, µs)", *(f"{v:.0f}" for v in own[base_label])]]
    rows += [[label, *(f"{v:+.0f}" for v in values)] for label, values in added.items()]
    drf = added.get("DRF AnonRateThrottle")
    ratio_rows = []
    if drf is not None:
        ratio_rows = [
            [
                label,
                *(f"{v / d:.2f}x" if d > 0 else "n/a" for v, d in zip(values, drf, strict=True)),
            ]
            for label, values in added.items()
            if label.startswith("PolicyThrottle")
        ]
    heads = [_name(q) for q in PERCENTILES]
    body = "\n\n".join(
        [
            __doc__.split("\n\n", 1)[1].strip(),
            "Time added per request, µs, at each percentile (the first row: the "
            "unthrottled view's own time):",
            markdown_table(["limiter", *heads], rows),
            "PolicyThrottle's added time over DRF AnonRateThrottle's, at the same percentile:",
            markdown_table(["limiter", *heads], ratio_rows) if ratio_rows else "n/a",
            f"- {requests:,} requests per contender and run, in {ROUNDS} rounds, after 200 "
            f"warm-up requests each; median of {ctx.runs} runs. Percentiles by nearest "
            f"rank: p99.9 of {requests:,} requests is the "
            f"{max(1, round(requests / 1000))}th slowest. The garbage collector is "
            "on (what a run's start held is frozen), so its pauses land in the tails, as "
            "in a real worker.",
        ]
    )
    return Section("Latency percentiles (in process)", body)
