"""Redis memory per client, per algorithm, with every client's window full.

Each client is filled to its limit through the real limiter (pipelined
:func:`ratelimits.testing.replay.queue_decide` calls at explicit times inside one clock-aligned
hour, so nothing expires and every request is admitted), and through the ``limits``
library's moving window and sliding-window counter (``hit()``). Two measures:

* ``MEMORY USAGE key SAMPLES 0`` of one client's key(s): the value, the key name and its
  dict entry, as Redis counts them. The targets are judged on this one.
* the ``used_memory`` delta over N clients, divided by N: everything the clients added
  (key names, the main and expires dicts, allocator rounding), read when the
  measuring connection is the server's only one.

A ``concurrency`` client at its limit has ``limit`` requests in progress at once (its
worst case; a lease is a sorted-set entry, as a ``sliding_log`` admission is).

Memory does not vary between runs (same fills, same allocator), so each figure is one
fill. Redis is flushed before each one.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from limits import RateLimitItem, RateLimitItemPerHour
from limits.storage import RedisStorage
from limits.strategies import (
    MovingWindowRateLimiter,
    RateLimiter,
    SlidingWindowCounterRateLimiter,
)

from bench.common import Chart, Context, Section, Target, markdown_table, median, ratio
from ratelimits.engine import limiter
from ratelimits.engine.keys import names as keys
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.testing.replay import queue_decide
from ratelimits.tools import memory

ALGORITHMS = [
    a
    for a in (
        "sliding_log",
        "compact_log",
        "sliding_counter",
        "fixed_window",
        "token_bucket",
        "concurrency",
    )
    if a in keys.ALGORITHM_SUFFIX
]
#: The ``limits`` strategies compared, by the label the tables use.
LIBRARY = {
    "limits moving window": MovingWindowRateLimiter,
    "limits sliding window counter": SlidingWindowCounterRateLimiter,
}
REFERENCE = "limits moving window"
LIMITS = (5, 100, 1000)
WINDOW = 3600
#: Start of a clock-aligned hour: every fill time lies in [START, START + SPREAD).
START = 1_749_999_600
SPREAD = 60.0
PIPELINE_CHUNK = 5000
#: Threads calling ``limits``' ``hit()``.
THREADS = 8
#: Keys sampled for ``MEMORY USAGE`` (their median; the keys of one fill are alike).
SAMPLED_KEYS = 5
#: A little over one tick of Redis's timer (hz 10).
SETTLE = 0.12
COUNTER_TARGET = 150
#: A token bucket's key: one number, whatever the limit or the burst.
BUCKET_TARGET = 100
COMPACT_TARGET = 8_500


@dataclass(frozen=True)
class Measure:
    """Memory of ``clients`` clients, each at its limit."""

    key_bytes: float
    delta_bytes: float
    clients: int


def identity(index: int) -> str:
    """A realistic client identity, distinct for each index."""
    return f"ip:10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}"


def clients_for(ctx: Context, limit: int) -> int:
    """How many clients to fill at ``limit`` (fewer at 1000, where a log is large)."""
    if limit >= 1000:
        return ctx.scaled(200, 5)
    return ctx.scaled(1000, 10)


def used_memory(ctx: Context, timeout: float = 5.0) -> int:
    """``used_memory`` less the reading connection's own memory, read on a fresh
    connection once it is the server's only one (the others' buffers freed)."""
    with ctx.client() as client:
        deadline = time.monotonic() + timeout
        while int(client.info("clients")["connected_clients"]) > 1:
            if time.monotonic() > deadline:
                raise RuntimeError("other connections stay open on the benchmark's Redis")
            time.sleep(0.01)
        pipe = client.pipeline(transaction=True)  # one moment: no timer runs in between
        pipe.client_info()
        pipe.info("memory")
        mine, info = pipe.execute()
    return int(info["used_memory"]) - int(mine["tot-mem"])


def settled_used_memory(ctx: Context, tries: int = 20) -> int:
    """:func:`used_memory` once two readings a timer tick apart agree (Redis's timer
    resizes buffers and tables); a quick pass takes the first reading."""
    reading = used_memory(ctx)
    for _ in range(0 if ctx.quick else tries):
        time.sleep(SETTLE)
        previous, reading = reading, used_memory(ctx)
        if reading == previous:
            break
    return reading


def flushall(ctx: Context) -> None:
    with ctx.client() as client:
        client.flushall()


def fill_ours(ctx: Context, policy: CompiledPolicy, indexes: range) -> None:
    """Bring each client of ``indexes`` to ``policy.limit`` through the decide script."""
    limit = policy.limit
    step = SPREAD / limit
    admitted = 0
    with ctx.client() as client:
        pipe = client.pipeline(transaction=False)
        for index in indexes:
            checks = [limiter.Check(policy, identity(index))]
            for n in range(limit):
                queue_decide(checks, pipe, now=START + n * step)
            if len(pipe) >= PIPELINE_CHUNK:
                admitted += sum(int(reply[0]) for reply in pipe.execute())
        admitted += sum(int(reply[0]) for reply in pipe.execute())
    if admitted != len(indexes) * limit:
        raise RuntimeError(f"{policy.algorithm}: {admitted} of {len(indexes) * limit} admitted")


def key_bytes(ctx: Context, patterns: list[str]) -> float:
    """Median over ``patterns`` of the summed ``MEMORY USAGE`` of the keys each matches."""
    sizes = []
    with ctx.client() as client:
        for pattern in patterns:
            found = list(client.scan_iter(match=pattern, count=1000))
            sizes.append(sum(client.memory_usage(key, samples=0) or 0 for key in found))
    return median(sizes)


def measure_ours(ctx: Context, algorithm: str, limit: int, clients: int) -> Measure:
    """Fill ``clients`` clients to ``limit`` through the limiter's decide script.

    A warm-up fill of two other clients comes first, flushed before the baseline: some
    memory Redis allocates on first use stays."""
    policy = CompiledPolicy.build(
        name="api", endpoint="api", algorithm=algorithm, limit=limit, window=WINDOW, key="ip"
    )
    flushall(ctx)
    fill_ours(ctx, policy, range(clients, clients + 2))
    flushall(ctx)
    before = settled_used_memory(ctx)
    fill_ours(ctx, policy, range(clients))
    after = settled_used_memory(ctx)
    sample = range(min(SAMPLED_KEYS, clients))
    found = key_bytes(ctx, [keys.escape_glob(policy.key_for(identity(i))) for i in sample])
    return Measure(found, (after - before) / clients, clients)


def fill_library(ctx: Context, limiter_: RateLimiter, item: RateLimitItem, indexes: range) -> None:
    """Bring each client of ``indexes`` to ``item``'s limit with ``hit()``, from
    :data:`THREADS` threads (each ``hit()`` is a round trip; clients are independent).

    The sliding-window counter keeps two keys once a window has passed (the previous
    window's count, renamed, and the current one's). An hour cannot pass here, so after
    the fill each client's key gets the TTL it would have a minute into the next window,
    and ``hit()`` runs until the first denial: the library rolls the window itself and
    each client ends at its limit with both keys, as in steady traffic."""
    limit = item.amount

    def fill(index: int) -> None:
        for _ in range(limit):
            if not limiter_.hit(item, identity(index)):
                raise RuntimeError(f"{type(limiter_).__name__}: a fill request was denied")

    def top_up(index: int) -> None:
        for _ in range(limit + 1):
            if not limiter_.hit(item, identity(index)):
                return

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(fill, indexes))
        if isinstance(limiter_, SlidingWindowCounterRateLimiter):
            with ctx.client() as client:
                pipe = client.pipeline(transaction=False)
                for key in client.scan_iter(match="LIMITS:*}", count=1000):  # current windows
                    pipe.pexpire(key, (WINDOW - 60) * 1000)
                pipe.execute()
            list(pool.map(top_up, indexes))


def measure_library(ctx: Context, strategy: type[RateLimiter], limit: int, clients: int) -> Measure:
    """Fill ``clients`` clients to ``limit`` with a ``limits`` strategy (after a warm-up
    fill, flushed, as for ours)."""
    storage = RedisStorage(ctx.url)
    limiter_ = strategy(storage)
    item = RateLimitItemPerHour(limit)
    flushall(ctx)
    fill_library(ctx, limiter_, item, range(clients, clients + 2))
    storage.storage.connection_pool.disconnect()
    flushall(ctx)  # keeps the scripts
    before = settled_used_memory(ctx)
    fill_library(ctx, limiter_, item, range(clients))
    storage.storage.connection_pool.disconnect()
    after = settled_used_memory(ctx)
    sample = range(min(SAMPLED_KEYS, clients))
    found = key_bytes(ctx, [f"*{keys.escape_glob(item.key_for(identity(i)))}*" for i in sample])
    return Measure(found, (after - before) / clients, clients)


def warm_up(ctx: Context) -> None:
    """Small measurements, discarded: Redis allocates some memory for good on first use
    (about 24 KB here), which would otherwise land in the first figure."""
    for algorithm in ALGORITHMS:
        measure_ours(ctx, algorithm, 100, 10)
    for strategy in LIBRARY.values():
        measure_library(ctx, strategy, 5, 10)


def run(ctx: Context) -> Section:
    warm_up(ctx)
    results: dict[tuple[str, int], Measure] = {}
    for limit in LIMITS:
        clients = clients_for(ctx, limit)
        for algorithm in ALGORITHMS:
            results[algorithm, limit] = measure_ours(ctx, algorithm, limit, clients)
        for label, strategy in LIBRARY.items():
            results[label, limit] = measure_library(ctx, strategy, limit, clients)
    flushall(ctx)
    names = [*ALGORITHMS, *LIBRARY]

    rows = []
    for limit in LIMITS:
        reference = results[REFERENCE, limit]
        for name in names:
            found = results[name, limit]
            estimate = (
                memory.human(memory.bytes_per_client(name, limit)) if name in ALGORITHMS else ""
            )
            rows.append(
                [
                    name,
                    limit,
                    found.clients,
                    f"{found.key_bytes:,.0f}",
                    f"{found.delta_bytes:,.0f}",
                    ratio(found.key_bytes, reference.key_bytes),
                    ratio(found.delta_bytes, reference.delta_bytes),
                    estimate,
                ]
            )
    table = markdown_table(
        [
            "algorithm",
            "limit",
            "clients",
            "MEMORY USAGE of a client's key(s), B",
            "used_memory delta per client, B",
            "vs limits moving window (key)",
            "(delta)",
            "admin estimate",
        ],
        rows,
    )

    targets = []
    for algorithm in ("sliding_counter", "fixed_window"):
        if algorithm not in ALGORITHMS:
            continue
        found = [results[algorithm, limit] for limit in LIMITS]
        targets.append(
            Target(
                name=f"{algorithm}: memory per client at limits {', '.join(map(str, LIMITS))}",
                measured=" / ".join(f"{m.key_bytes:,.0f}" for m in found)
                + " B (MEMORY USAGE); used_memory delta "
                + " / ".join(f"{m.delta_bytes:,.0f}" for m in found)
                + " B",
                target=f"<= {COUNTER_TARGET} B per client (judged on MEMORY USAGE of the key)",
                met=all(m.key_bytes <= COUNTER_TARGET for m in found),
            )
        )
    if "token_bucket" in ALGORITHMS:
        found = [results["token_bucket", limit] for limit in LIMITS]
        targets.append(
            Target(
                name=f"token_bucket: memory per client at limits {', '.join(map(str, LIMITS))}",
                measured=" / ".join(f"{m.key_bytes:,.0f}" for m in found) + " B (MEMORY USAGE)",
                target=f"<= {BUCKET_TARGET} B per client (MEMORY USAGE of the key)",
                met=all(m.key_bytes <= BUCKET_TARGET for m in found),
            )
        )
    if "compact_log" in ALGORITHMS:
        found = results["compact_log", 1000]
        targets.append(
            Target(
                name="compact_log: memory per client at limit 1000",
                measured=f"{found.key_bytes:,.0f} B (MEMORY USAGE); "
                f"used_memory delta {found.delta_bytes:,.0f} B",
                target=f"<= {COMPACT_TARGET:,} B per client (judged on MEMORY USAGE of the key)",
                met=found.key_bytes <= COMPACT_TARGET,
            )
        )
    else:
        targets.append(
            Target(
                name="compact_log: memory per client at limit 1000",
                measured="not measured: compact_log is not in this build",
                target=f"<= {COMPACT_TARGET:,} B per client",
                met=None,
            )
        )

    chart = Chart(
        title="Redis memory per client at limit 1000 (used_memory delta / clients)",
        unit="bytes",
        bars=[(name, results[name, 1000].delta_bytes) for name in names],
    )
    summary = []
    if "compact_log" in ALGORITHMS:
        compact, log = results["compact_log", 1000], results["sliding_log", 1000]
        reference = results[REFERENCE, 1000]
        summary.append(
            f"At limit 1000 a compact_log client costs {compact.key_bytes:,.0f} B "
            f"({log.key_bytes / compact.key_bytes:.0f}x less than sliding_log's sorted set, "
            f"{reference.key_bytes / compact.key_bytes:.1f}x less than `limits`' moving "
            "window, whose list stores each timestamp as a decimal string)."
        )
    markdown = "\n\n".join(
        [
            "Memory per client with every client at its limit (a full window). Ours are "
            "filled through the limiter itself: pipelined decide calls at explicit times "
            f"inside one clock-aligned {WINDOW} s window, all admitted. The `limits` "
            f"library ({', '.join(LIBRARY)}) is filled with `hit()`, per hour. "
            f"**MEMORY USAGE** (`SAMPLES 0`, median of {SAMPLED_KEYS} clients) counts one "
            "client's key: value, key name and dict entry; for `limits`' sliding-window "
            "counter, the sum of its two keys. **used_memory delta** is the growth of "
            "`used_memory` over all the clients, divided by their number, read on a fresh "
            "connection when it is the server's only one, less that connection's own "
            "memory, once two readings a timer tick apart agree: it adds the expires "
            "dict, the dicts' bucket arrays and allocator rounding, so it is what a client "
            "really costs. The targets are judged on MEMORY USAGE. `limits`' "
            "sliding-window counter is measured in steady state (previous and current "
            "window both held): after the fill its keys' TTLs are moved a minute into the "
            "next window and `hit()` runs until the first denial. *Admin estimate* is "
            "`ratelimits.memory.bytes_per_client`. One fill per figure, after a discarded "
            "warm-up: repeated fills give the same bytes.",
            *summary,
            table,
        ]
    )
    return Section(title="Memory per client", markdown=markdown, targets=targets, charts=[chart])
