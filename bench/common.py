"""What every benchmark shares: the run's context, its result shape and small helpers.

A benchmark module exposes ``run(ctx: Context) -> Section``. ``python -m bench`` starts
one Redis server pinned to a fixed CPU, pins itself to another (or the same, with
``--placement same``), sets Django up with :mod:`bench.settings`, runs the modules and
writes ``bench/RESULTS.md`` and ``bench/results.png`` from their sections.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import redis

from ratelimits.testutils import RedisServer

BENCH_DIR = Path(__file__).resolve().parent
#: Anchors and tools whose versions the report states.
PACKAGES = (
    "Django",
    "djangorestframework",
    "django-redis",
    "redis",
    "hiredis",
    "limits",
    "django-ratelimit",
    "django-smart-ratelimit",
    "gunicorn",
)


#: The commands one decide call can be, as ``INFO commandstats`` names them: ``FCALL``
#: on Redis 7+, the script by SHA (or with its source, once after a flush) elsewhere.
DECIDE_COMMANDS = ("fcall", "evalsha", "eval")


@dataclass(frozen=True)
class Target:
    """One target of the issue, as measured: ``met`` is ``None`` when not applicable."""

    name: str
    measured: str
    target: str
    met: bool | None


@dataclass(frozen=True)
class Chart:
    """A horizontal bar chart: ``bars`` are ``(label, value)``, drawn in order."""

    title: str
    unit: str
    bars: list[tuple[str, float]]


@dataclass
class Section:
    """A benchmark's result: a markdown body (tables, notes) and the targets it checks."""

    title: str
    markdown: str
    targets: list[Target] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)


@dataclass
class Context:
    """The run: its Redis server, CPU placement and how much to measure."""

    redis: RedisServer
    #: CPU the benchmark process runs on, and the Redis server's.
    client_cpu: int | None
    redis_cpu: int | None
    #: Runs per figure (the figure is their median); at least 5 except with ``quick``.
    runs: int = 5
    #: A fast pass (tiny counts) that only proves the code runs: ``--quick`` and the tests.
    quick: bool = False

    @property
    def url(self) -> str:
        return self.redis.url

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.redis.port)

    def scaled(self, full: int, quick: int) -> int:
        """``full`` normally, ``quick`` in a quick pass."""
        return quick if self.quick else full


def pin_process(cpu: int | None) -> None:
    """Run this process on ``cpu`` only (no-op for ``None`` or where unsupported)."""
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def percentile(values: Iterable[float], fraction: float) -> float:
    """The ``fraction`` quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def time_per_call(function: Callable[[], object], calls: int) -> float:
    """Mean seconds per call of ``function`` over ``calls`` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls


def command_stats(client: redis.Redis) -> dict[str, int]:
    """``INFO commandstats`` as ``{command: calls}`` (``evalsha``, ``get``...)."""
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


def command_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Calls per command between two :func:`command_stats` readings (zeros left out).

    ``INFO`` itself is counted once by the second reading; it is left out too."""
    delta = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    delta.pop("info", None)
    return {name: n for name, n in delta.items() if n}


def ratio(ours: float, theirs: float) -> str:
    """``0.42x`` (ours over theirs)."""
    return f"{ours / theirs:.2f}x" if theirs else "n/a"


def markdown_table(header: list[str], rows: Iterable[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows)
    return "\n".join(lines)


def contenders_table(
    what: str,
    times: dict[str, list[float]],
    calls: dict[str, float],
    *,
    baseline: str,
    anchor: str,
    uncounted: Iterable[str] = (),
) -> str:
    """A table of contenders taking turns: per label, µs (the median of its runs, and
    each run), the decide calls Redis counted per ``what`` (``n/a`` for the ``uncounted``
    anchors), and ratios to ``baseline`` and to ``anchor``."""
    us = {label: median(runs) for label, runs in times.items()}
    skip = set(uncounted)
    rows = [
        [
            label,
            f"{us[label]:.1f}",
            ", ".join(f"{v:.1f}" for v in runs),
            f"{calls[label]:.2f}" if label not in skip else "n/a",
            ratio(us[label], us[baseline]),
            ratio(us[label], us[anchor]),
        ]
        for label, runs in times.items()
    ]
    header = [what, "µs (median)", "runs", "decide calls", f"vs {baseline}", f"vs {anchor}"]
    return markdown_table(header, rows)


def machine_facts(ctx: Context) -> dict[str, str]:
    """Machine, versions and CPU placement, for the report's header."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = []
    for package in PACKAGES:
        try:
            versions.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package} (not installed)")
    server = ctx.client().info("server")
    return {
        "CPU": f"{cpu}, {os.cpu_count()} logical CPUs",
        "OS": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "Redis": f"{server['redis_version']} ({ctx.redis.binary})",
        "Packages": ", ".join(versions),
        "Placement": (
            f"benchmark process on CPU {ctx.client_cpu}, redis-server on CPU {ctx.redis_cpu}"
            if ctx.client_cpu is not None
            else "not pinned"
        ),
        "Runs": f"median of {ctx.runs} runs per figure" + (" (quick pass)" if ctx.quick else ""),
    }
