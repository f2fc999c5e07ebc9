"""Requests per second end to end: the benchmark's site under gunicorn, driven by a load
client in another process.

gunicorn serves :mod:`bench.settings` (the same database and Redis as the benchmark)
with :data:`WORKERS` ``gthread`` workers, so connections are kept alive; the load client
(:func:`load_worker`, a spawned process) keeps :data:`CONNECTIONS` keep-alive
connections busy from as many threads. It plays 1,000 clients by writing their
addresses in ``X-Forwarded-For`` (the settings trust one proxy, and DRF's throttles read
that header), each far below the limit, so every request is admitted. Each measurement
is bounded in time and in count; every process is stopped in ``finally``.

Placement (see :func:`placements`): gunicorn alone on the benchmark's CPU, with Redis
and the load client on the other; then gunicorn sharing Redis's CPU, the load client on
the other.
"""

from __future__ import annotations

import contextlib
import http.client
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench.common import BENCH_DIR, Chart, Context, Section, markdown_table, median
from ratelimits.testutils import free_port, stop_process

ROOT = BENCH_DIR.parent
WORKERS = 2
CONNECTIONS = 4
CLIENTS = 1000
#: Per client address and hour: far above what one client sends here.
LIMIT = 10_000
START_TIMEOUT = 30.0
#: Rounds per run: every endpoint gets a slice of the run's time in each, in turn.
ROUNDS = 6
FIRST_CLIENT = (10 << 24) + (200 << 16)  # 10.200.0.0


@dataclass(frozen=True)
class Endpoint:
    """One endpoint under load."""

    label: str
    path: str


TARGETS = (
    Endpoint("no throttle", f"/none/{LIMIT}/"),
    Endpoint("PolicyThrottle sliding_log", f"/policy/bench1-sliding_log-{LIMIT}/"),
    Endpoint("DRF AnonRateThrottle", f"/drf-anon/{LIMIT}/"),
)


@dataclass
class Load:
    """What one load measurement got."""

    requests: int
    seconds: float
    statuses: dict[int, int]
    errors: list[str]

    @property
    def rps(self) -> float:
        return self.statuses.get(200, 0) / self.seconds if self.seconds > 0 else 0.0


def combined(parts: Sequence[Load]) -> Load:
    """The slices of one run as one measurement."""
    statuses: Counter[int] = Counter()
    for part in parts:
        statuses.update(part.statuses)
    return Load(
        sum(p.requests for p in parts),
        sum(p.seconds for p in parts),
        dict(statuses),
        [e for p in parts for e in p.errors],
    )


def client_address(n: int) -> str:
    """The ``n``-th client's address (``n`` taken modulo :data:`CLIENTS`), dotted."""
    address = FIRST_CLIENT + n % CLIENTS
    return f"{address >> 24}.{(address >> 16) & 255}.{(address >> 8) & 255}.{address & 255}"


def pinned(cpu: int | None) -> list[str]:
    """The command prefix that runs a program on ``cpu`` only (none when ``cpu`` is
    ``None`` or there is no ``taskset``)."""
    return ["taskset", "-c", str(cpu)] if cpu is not None and shutil.which("taskset") else []


def fire(
    port: int, path: str, seconds: float, max_requests: int, connections: int, start: int
) -> Load:
    """Keep ``connections`` keep-alive connections busy with GETs of ``path`` for at most
    ``seconds`` and ``max_requests`` requests; client addresses rotate over
    :data:`CLIENTS`, from ``start``."""
    barrier = threading.Barrier(connections + 1)
    lock = threading.Lock()
    statuses: Counter[int] = Counter()
    errors: list[str] = []
    quota = max(1, max_requests // connections)
    stop_at = [0.0]

    def client(index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        mine: Counter[int] = Counter()
        try:
            barrier.wait(timeout=30)
            for n in range(quota):
                if time.perf_counter() >= stop_at[0]:
                    break
                forwarded = client_address(start + index + n * connections)
                conn.request("GET", path, headers={"X-Forwarded-For": forwarded})
                response = conn.getresponse()
                response.read()
                mine[response.status] += 1
        except Exception as e:
            with lock:
                errors.append(repr(e))
        finally:
            conn.close()
            with lock:
                statuses.update(mine)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(connections)]
    for thread in threads:
        thread.start()
    stop_at[0] = time.perf_counter() + seconds
    started = time.perf_counter()
    barrier.wait(timeout=30)
    for thread in threads:
        thread.join(timeout=seconds + 30)
    elapsed = time.perf_counter() - started
    return Load(sum(statuses.values()), elapsed, dict(statuses), errors)


def load_worker(conn: Connection, cpu: int | None) -> None:
    """The load client's process: runs :func:`fire` for each job received, until ``None``."""
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    while True:
        job = conn.recv()
        if job is None:
            return
        conn.send(fire(**job))


class LoadClient:
    """A spawned load-client process, pinned to ``cpu``."""

    def __init__(self, cpu: int | None) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=load_worker, args=(child, cpu), daemon=True)
        self.process.start()
        child.close()

    def fire(self, timeout: float, **job: Any) -> Load:
        self.conn.send(job)
        if not self.conn.poll(timeout):
            raise TimeoutError(f"the load client did not answer in {timeout:.0f} s")
        result: Load = self.conn.recv()
        return result

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=5)
        self.conn.close()


class Gunicorn:
    """gunicorn serving :mod:`bench.settings` on a free port, pinned to ``cpu``."""

    def __init__(self, cpu: int | None, workers: int) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="ratelimits-bench-gunicorn-"))
        self.log = self.dir / "gunicorn.log"
        command = [
            *pinned(cpu),
            sys.executable,
            "-m",
            "gunicorn",
            "project.wsgi:application",
            "--workers",
            str(workers),
            "--worker-class",
            "gthread",
            "--threads",
            "1",
            "--bind",
            f"127.0.0.1:{self.port}",
            "--log-level",
            "warning",
        ]
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench.settings"}
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def wait_ready(self, path: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited ({self.process.returncode}):\n{self.output()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", path)
                if conn.getresponse().status == 200:
                    conn.close()
                    return
                conn.close()
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"gunicorn did not answer in {START_TIMEOUT} s:\n{self.output()}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        stop_process(self.process)
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass(frozen=True)
class Placement:
    """Where gunicorn and the load client run."""

    name: str
    server_cpu: int | None
    client_cpu: int | None
    text: str


def placements(ctx: Context) -> list[Placement]:
    """The arrangements measured: with CPUs of their own for the benchmark and Redis,
    gunicorn alone on a CPU (Redis usually runs on another machine, so its CPU time does
    not come out of the app server's), then gunicorn sharing Redis's CPU (one machine
    for both: Redis's time per request counts against the app's throughput)."""
    if ctx.client_cpu is None or ctx.redis_cpu is None:
        return [Placement("unpinned", None, None, "nothing pinned")]
    if ctx.client_cpu == ctx.redis_cpu:
        cpu = ctx.redis_cpu
        return [Placement("one CPU", cpu, cpu, f"gunicorn, Redis and the load client on CPU {cpu}")]
    return [
        Placement(
            "gunicorn alone on a CPU",
            ctx.client_cpu,
            ctx.redis_cpu,
            f"gunicorn on CPU {ctx.client_cpu}; redis-server and the load client on CPU "
            f"{ctx.redis_cpu}",
        ),
        Placement(
            "gunicorn sharing Redis's CPU",
            ctx.redis_cpu,
            ctx.client_cpu,
            f"gunicorn and redis-server on CPU {ctx.redis_cpu}; the load client on CPU "
            f"{ctx.client_cpu}",
        ),
    ]


Loads = dict[str, list[Load]]


def measure_placement(ctx: Context, where: Placement, seconds: float) -> Loads:
    """Every target under load, ``ctx.runs`` runs, with gunicorn and the load client
    placed as ``where`` says; both are stopped before returning."""
    from bench.overhead import flush_counts

    warmup = ctx.scaled(1.0, 0.2)
    max_requests = ctx.scaled(100_000, 2_000)
    server = Gunicorn(where.server_cpu, WORKERS)
    client: LoadClient | None = None
    loads: Loads = {t.label: [] for t in TARGETS}
    try:
        server.wait_ready(TARGETS[0].path)
        client = LoadClient(where.client_cpu)
        start = 0

        def measure(target: Endpoint, duration: float) -> Load:
            nonlocal start
            flush_counts(ctx)
            assert client is not None
            load = client.fire(
                duration + 60,
                port=server.port,
                path=target.path,
                seconds=duration,
                max_requests=max_requests,
                connections=CONNECTIONS,
                start=start,
            )
            start += load.requests
            return load

        for target in TARGETS:
            measure(target, warmup)
        turn = 0
        for _ in range(ctx.runs):
            slices: Loads = {t.label: [] for t in TARGETS}
            for _ in range(ROUNDS):
                turn += 1
                shift = turn % len(TARGETS)
                for target in (*TARGETS[shift:], *TARGETS[:shift]):
                    slices[target.label].append(measure(target, seconds / ROUNDS))
            for label, parts in slices.items():
                loads[label].append(combined(parts))
    finally:
        if client is not None:
            client.stop()
        server.stop()
    return loads


def run(ctx: Context) -> Section:
    from bench.overhead import flush_counts, install, uninstall

    seconds = ctx.scaled(3.0, 0.3)
    install([LIMIT], ["sliding_log"])
    measured: list[tuple[Placement, Loads]] = []
    try:
        for where in placements(ctx):
            measured.append((where, measure_placement(ctx, where, seconds)))
    finally:
        uninstall()
        flush_counts(ctx)
    return Section(
        "Requests per second end to end (gunicorn)",
        describe(ctx, measured, seconds),
        charts=[chart(where, loads) for where, loads in measured],
    )


def table(loads: Loads) -> str:
    base = median(load.rps for load in loads[TARGETS[0].label])
    rows = []
    for target in TARGETS:
        runs = loads[target.label]
        rps = median(load.rps for load in runs)
        statuses: Counter[int] = Counter()
        for load in runs:
            statuses.update(load.statuses)
        errors = sum(len(load.errors) for load in runs)
        other = {s: n for s, n in statuses.items() if s != 200}
        rows.append(
            [
                target.label,
                f"{rps:,.0f}",
                f"{rps / base:.2f}x" if base else "n/a",
                f"{1e6 / rps - 1e6 / base:+.0f}" if rps and base else "n/a",
                ", ".join(f"{load.rps:,.0f}" for load in runs),
                f"{sum(statuses.values()):,}",
                (", ".join(f"{n} x {s}" for s, n in sorted(other.items())) or "none")
                + (f"; {errors} client errors" if errors else ""),
            ]
        )
    return markdown_table(
        [
            "endpoint",
            "requests/s (median)",
            "vs no throttle",
            "µs per request added",
            "each run",
            "requests",
            "answers not 200",
        ],
        rows,
    )


def describe(ctx: Context, measured: Sequence[tuple[Placement, Loads]], seconds: float) -> str:
    lines = [
        f"Median of {ctx.runs} runs of {seconds:g} s per endpoint, each run in {ROUNDS} "
        "rounds where every endpoint takes its slice in turn (the order rotating), after "
        "a warm-up of each. The µs added is 1/rate minus the unthrottled 1/rate: server "
        "time per request at this load.",
    ]
    for where, loads in measured:
        lines += ["", f"**{where.name}** ({where.text}):", "", table(loads)]
    lines += [
        "",
        f"- gunicorn: {WORKERS} `gthread` workers, 1 thread each (keep-alive), the "
        "benchmark's settings and database. Load: one process, "
        f"{CONNECTIONS} keep-alive connections from as many threads, 1,000 client "
        "addresses in X-Forwarded-For, each well under the limit "
        f"({LIMIT:,} per hour; PolicyThrottle keyed by IP with one trusted proxy, DRF "
        "reading the header), so every request is admitted. Redis is flushed before "
        "each slice.",
    ]
    return "\n".join(lines)


def chart(where: Placement, loads: Loads) -> Chart:
    return Chart(
        f"Requests per second under gunicorn, end to end ({where.name})",
        "requests per second (median)",
        [(t.label, median(load.rps for load in loads[t.label])) for t in TARGETS],
    )


__all__: Sequence[str] = ("run",)
