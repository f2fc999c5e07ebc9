"""Redis memory per active client, and Redis work per request, estimated from measured
figures.

Measured with ``MEMORY USAGE key SAMPLES 0`` with default settings on three servers
(:data:`~.measured.MEASURED`): Redis 7.0.15 with jemalloc (:data:`~.measured.REFERENCE`,
the figures the admin shows), Redis 6.2.14 and Valkey 9.1.2, both with libc's malloc;
:func:`~.measured.measured_for` picks a server's figures from its ``INFO``. The keys are
of this app's layout (``rl:{ip:203.0.113.7}:login:<suffix>``) holding a client at its
limit, every request of cost 1. A ``sliding_log`` keeps one sorted-set entry per
admitted request in the window, whatever its cost: up to 128 entries the server packs
them in a listpack (about 20 B each); from 129 it switches to a skiplist and a hash
table (about 94 B each on Redis 7, 104 B on Redis 6.2, 78 B on Valkey 9). A
``compact_log`` keeps 8 bytes per admitted request in one string (time and position,
modulo 2^48 and 2^16; 16 while a client holds 65,536 units or more), in a ring of
exactly its entries up to 4 KB, then a quarter over them up to the limit (about 8.3 KB
at limit 1000). A request of cost n is one entry in both, so these are the figures at
limit n requests of cost 1: heavier requests cost less. The two counters keep a small
hash whatever the limit. A
``concurrency`` key is a sorted set of leases, one entry per request in progress, beside
its running total (one more entry): a client with ``limit`` requests in progress costs
about what a log of ``limit`` entries does (measured apart, in :mod:`~.measured`).

A calendar policy's count is a ``fixed_window`` hash whose window field is the period's
start in microseconds: the same size (measured: no difference on Redis 7.0), but it is
kept until the period ends, up to a month, so every client seen in the period counts as
active. A lockout adds, while a client is locked out, one small string beside its counts:
when the lockout ends.

The work (:func:`work_per_request`) is what the Lua code does for one request, counted in
Redis commands: it never grows with the request's cost, and for the logs grows with the
logarithm of the entries in the window.
"""

from __future__ import annotations

import bisect

from ratelimits.engine import algorithms
from ratelimits.tools.memory_figures import (
    MEASURED,
    REDIS_6,
    REDIS_7,
    REFERENCE,
    VALKEY_9,
    Measured,
    measured_for,
)

# The reference's figures, by the names the admin and its script read.
SLIDING_LOG_POINTS = REFERENCE.sliding_log
COMPACT_LOG_POINTS = REFERENCE.compact_log
CONCURRENCY_POINTS = REFERENCE.concurrency
#: Which of :class:`Measured`'s figures is each algorithm's key: measured points for one
#: whose size grows with the limit, one size for one that stays small.
FIGURES: dict[str, str] = {
    "sliding_log": "sliding_log",
    "compact_log": "compact_log",
    "sliding_counter": "counter",
    "fixed_window": "counter",
    "token_bucket": "bucket",
    "concurrency": "concurrency",
}
#: Every algorithm whose size grows with the limit (the logs, concurrency's leases), by
#: the reference's measured points.
GROWING_POINTS: dict[str, tuple[tuple[int, int], ...]] = {
    name: figure
    for name, figure in ((n, getattr(REFERENCE, f)) for n, f in FIGURES.items())
    if isinstance(figure, tuple)
}
#: The measured points of the logs, whose size grows with the limit (and which the admin
#: may suggest replacing: see :func:`is_large`).
LOG_POINTS = {n: p for n, p in GROWING_POINTS.items() if algorithms.keeps_entries(n)}
COUNTER_BYTES = REFERENCE.counter
BUCKET_BYTES = REFERENCE.bucket
LOCK_BYTES = REFERENCE.lock
#: How long a calendar period's count is kept at most, in words: until the period ends.
PERIOD_KEPT = {"day": "a day", "week": "a week", "month": "a month, 31 days"}

#: Above this, the admin suggests sliding_counter instead of a log.
LARGE_BYTES = 16 * 1024


def bytes_per_client(algorithm: str, limit: int, measured: Measured = REFERENCE) -> int:
    """Estimated bytes of Redis memory for one client at ``limit`` under ``algorithm``, by
    the figures ``measured`` on one server (the reference's unless told)."""
    figure = getattr(measured, FIGURES.get(algorithm, "counter"))
    if isinstance(figure, int):
        return figure
    points: tuple[tuple[int, int], ...] = figure
    limit = max(1, int(limit))
    counts = [entries for entries, _ in points]
    index = bisect.bisect_left(counts, limit)
    if index < len(counts) and counts[index] == limit:
        return points[index][1]
    if index == 0:
        return points[0][1]
    if index == len(counts):  # past the last measurement: its slope goes on
        index = len(counts) - 1
    (x0, y0), (x1, y1) = points[index - 1], points[index]
    return round(y0 + (y1 - y0) * (limit - x0) / (x1 - x0))


def is_large(algorithm: str, limit: int) -> bool:
    """True when a log at this limit costs enough that a smaller algorithm is worth it
    (never for concurrency: no other algorithm counts requests in progress)."""
    return algorithm in LOG_POINTS and bytes_per_client(algorithm, limit) > LARGE_BYTES


def human(size: int) -> str:
    """``104 B``, ``3.6 KB``, ``1.2 MB``."""
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} KB"
    return f"{size / 1_000_000:.1f} MB"


#: Redis work per request, per algorithm: (its order, what it is). n is the entries in
#: the window (admitted requests, at most the limit), never the request's cost.
WORK: dict[str, tuple[str, str]] = {
    "sliding_counter": ("O(1)", "2 to 4 commands on one small hash"),
    "fixed_window": ("O(1)", "2 to 4 commands on one small hash"),
    "token_bucket": ("O(1)", "a GET and a SET of one number"),
    "sliding_log": (
        "O(log n)",
        "about 5 sorted-set commands of O(log n) each; a denied request adds a binary "
        "search of about log2(n) more",
    ),
    "compact_log": (
        "O(log n)",
        "about 2 x log2(n) reads of 8 bytes and 2 small writes; growing or shrinking the "
        "ring copies it, at most once per quarter of its entries admitted",
    ),
    "concurrency": (
        "O(log n)",
        "about 5 sorted-set commands of O(log n) each, and one more call after the "
        "response to give the lease back",
    ),
}
#: From this limit the admin warns about a log's work (a denial searches about 17 steps,
#: and a give-back renumbers the entries admitted during its response).
LARGE_WORK_LIMIT = 100_000


def work_per_request(algorithm: str, limit: int) -> tuple[str, str, bool]:
    """(order, what it is, large) of one request's Redis work under ``algorithm`` at
    ``limit`` (``n`` is at most the limit)."""
    order, what = WORK.get(algorithm, WORK[algorithms.DEFAULT])
    large = algorithm in LOG_POINTS and int(limit) >= LARGE_WORK_LIMIT
    return order, what, large


__all__ = [
    "BUCKET_BYTES",
    "COMPACT_LOG_POINTS",
    "CONCURRENCY_POINTS",
    "COUNTER_BYTES",
    "GROWING_POINTS",
    "LARGE_BYTES",
    "LARGE_WORK_LIMIT",
    "LOCK_BYTES",
    "LOG_POINTS",
    "MEASURED",
    "PERIOD_KEPT",
    "REDIS_6",
    "REDIS_7",
    "REFERENCE",
    "SLIDING_LOG_POINTS",
    "VALKEY_9",
    "WORK",
    "Measured",
    "bytes_per_client",
    "human",
    "is_large",
    "measured_for",
    "work_per_request",
]
