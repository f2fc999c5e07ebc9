"""Redis memory per active client, estimated from measured figures.

Measured with ``MEMORY USAGE key SAMPLES 0`` on Redis 7.0 with default settings, for
keys of this app's layout (``rl:{ip:203.0.113.7}:<policy>:<suffix>``) holding a client
at its limit. A ``sliding_log`` keeps one sorted-set entry per admission in the window:
up to 128 entries Redis packs them in a listpack (about 35 B each); from 129 it switches
to a skiplist and a hash table (about 120 B each). A ``compact_log`` keeps 8 bytes per
admission in one string (about 8.3 KB at limit 1000). The two counters keep a small hash
whatever the limit. A ``concurrency`` key is a sorted set of leases, one entry per request
in progress, named and sized like a ``sliding_log`` entry: a client with ``limit``
requests in progress costs what a log of ``limit`` entries does (measured apart, below).

A calendar policy's count is a ``fixed_window`` hash whose window field is the period's
start in microseconds: the same size (measured: no difference on Redis 7.0), but it is
kept until the period ends, up to a month, so every client seen in the period counts as
active. A lockout adds, while a client is locked out, one small string beside its counts:
when the lockout ends.
"""

from __future__ import annotations

import bisect

#: (entries, bytes) for a sliding_log key, as measured.
SLIDING_LOG_POINTS: tuple[tuple[int, int], ...] = (
    (1, 120),
    (10, 392),
    (50, 1864),
    (100, 3656),
    (128, 4168),
    (129, 18008),
    (200, 24944),
    (500, 59696),
    (1000, 118240),
    (2000, 234560),
    (5000, 646480),
    (10000, 1290928),
)
#: (entries, bytes) for a compact_log key, as measured.
COMPACT_LOG_POINTS: tuple[tuple[int, int], ...] = (
    (1, 88),
    (5, 120),
    (10, 168),
    (50, 520),
    (100, 968),
    (200, 1864),
    (500, 4168),
    (1000, 8264),
    (2000, 16456),
    (5000, 41032),
    (10000, 81992),
)
#: (leases, bytes) for a concurrency key with that many requests in progress, as measured
#: (Redis 7.0.15, the median of 5 clients, each filled through the limiter to its limit):
#: the same as a sliding_log's listpack up to 128 entries; past it within 1 % of it (a
#: skiplist's node levels are random).
CONCURRENCY_POINTS: tuple[tuple[int, int], ...] = (
    (1, 120),
    (5, 232),
    (10, 392),
    (50, 1864),
    (100, 3656),
    (128, 4168),
    (129, 18024),
    (200, 24752),
    (500, 59824),
    (1000, 118176),
    (2000, 236064),
    (5000, 646080),
    (10000, 1290432),
)
#: The measured points of the logs, whose size grows with the limit (and which the admin
#: may suggest replacing: see :func:`is_large`).
LOG_POINTS = {"sliding_log": SLIDING_LOG_POINTS, "compact_log": COMPACT_LOG_POINTS}
#: Every algorithm whose size grows with the limit: the logs, and concurrency's leases.
GROWING_POINTS = {**LOG_POINTS, "concurrency": CONCURRENCY_POINTS}
#: A sliding_counter or fixed_window key: one small hash at any limit.
COUNTER_BYTES = 104
#: A token_bucket key: one small string (measured: 72 B on one server, 88 B on a cluster
#: node, for a TAT in whole microseconds).
BUCKET_BYTES = 88

#: A lockout's key (``rl:{ip:203.0.113.7}:login:lock``): one string holding when the
#: lockout ends, kept as long as the lockout (measured: 72 B on Redis 7.0.15, 64 to 80 B
#: on 6.2; a 64-character policy name adds 64).
LOCK_BYTES = 72
#: How long a calendar period's count is kept at most, in words: until the period ends.
PERIOD_KEPT = {"day": "a day", "week": "a week", "month": "a month, 31 days"}

#: Above this, the admin suggests sliding_counter instead of a log.
LARGE_BYTES = 16 * 1024


def bytes_per_client(algorithm: str, limit: int) -> int:
    """Estimated bytes of Redis memory for one client at ``limit`` under ``algorithm``."""
    points = GROWING_POINTS.get(algorithm)
    if points is None:
        return BUCKET_BYTES if algorithm == "token_bucket" else COUNTER_BYTES
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
