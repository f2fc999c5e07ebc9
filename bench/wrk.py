"""Requests per second under ``wrk``: what each throttle adds to a request when a real
load generator drives the benchmark's site under gunicorn.

gunicorn serves :mod:`bench.settings` with :data:`WORKERS` ``gthread`` workers, started
and placed as in :mod:`bench.e2e`'s first placement (gunicorn alone on the benchmark's
CPU, ``wrk`` on Redis's). ``wrk`` drives twin views in turn, identical but for the
throttle: none, DRF's ``AnonRateThrottle`` on django-redis, the ``limits`` library's
moving window, and :class:`~ratelimits.throttling.PolicyThrottle` with one policy keyed by
IP, one view per algorithm. Its Lua
script (:func:`lua_script`) writes one of :data:`~bench.e2e.CLIENTS` client addresses in
``X-Forwarded-For`` per request, in turn (the settings trust one proxy), and the limit is
far above what any client sends, so the throttles count many clients and admit every
request. Redis is flushed before each run.

Each figure is the median over ``ctx.runs`` rounds, each round running every view once
for :data:`SECONDS` (the order rotating); a view's added time per request is
``1/rate - 1/rate(unthrottled)``. ``wrk``'s latency percentiles (p50, p90, p99, p99.9)
are read from each run too: a view's added latency at a percentile is its own minus the
unthrottled view's in the same round. A run with non-2xx answers or socket errors is flagged
in the table, and the target is not judged on such runs. Every ``wrk`` run is bounded by
``-d`` and ``--timeout`` (and killed if it outlives them); gunicorn is stopped in
``finally``. Without ``wrk`` on ``PATH`` the section says so.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common import Chart, Context, Section, Target, markdown_table, median
from bench.e2e import CLIENTS, Endpoint, Gunicorn, Placement, client_address, pinned, placements
from bench.overhead import WINDOW, flush_counts, install, policy_scope, uninstall

WORKERS = 4
TITLE = f"Requests per second under wrk (gunicorn, {WORKERS} workers)"
TARGET_NAME = "PolicyThrottle added time vs DRF AnonRateThrottle's under wrk"
#: Wanted: PolicyThrottle's added time per request at most this times DRF's.
TARGET = 0.35
THREADS = 2
CONNECTIONS = 8
#: Seconds per ``wrk`` run (``--quick``: :data:`QUICK_SECONDS`), per warm-up run, and
#: before a request counts as a timeout.
SECONDS = 5
QUICK_SECONDS = 1
WARMUP_SECONDS = 1
TIMEOUT = 5
#: Per client address and hour: no client comes near it.
LIMIT = 1_000_000
#: The policy's algorithm for the target: the Policy model's default.
ALGORITHM = "sliding_counter"
#: Every algorithm gets a view of its own (the percentiles' table).
ALGORITHMS = ("sliding_log", "compact_log", "sliding_counter", "fixed_window", "token_bucket")
#: The latency percentiles read from ``wrk``.
PERCENTILES = (50, 90, 99, 99.9)
#: The line the script's ``done`` prints, followed by its JSON.
MARK = "BENCH-WRK "


#: The twin views, identical but for the throttle.
VIEWS = (
    Endpoint("unthrottled", f"/none/{LIMIT}/"),
    Endpoint("DRF AnonRateThrottle", f"/drf-anon/{LIMIT}/"),
    Endpoint("limits moving window", f"/limits-moving/{LIMIT}/"),
    *(
        Endpoint(f"PolicyThrottle ({algorithm})", f"/policy/{policy_scope(algorithm, 1, LIMIT)}/")
        for algorithm in ALGORITHMS
    ),
)
BASE, DRF = VIEWS[0].label, VIEWS[1].label
OURS = f"PolicyThrottle ({ALGORITHM})"


@dataclass(frozen=True)
class WrkRun:
    """What one ``wrk`` run reported, and how many Redis keys the view left."""

    requests: int
    seconds: float
    non_2xx: int
    #: wrk's socket errors: connect, read, write, timeout.
    socket: dict[str, int]
    keys: int
    #: Latency at each of :data:`PERCENTILES`, µs.
    latency: tuple[float, ...] = ()

    @property
    def rps(self) -> float:
        """2xx answers per second."""
        return (self.requests - self.non_2xx) / self.seconds if self.seconds > 0 else 0.0

    @property
    def errors(self) -> int:
        return self.non_2xx + sum(self.socket.values())

    def problems(self) -> str:
        """``12 non-2xx, 3 timeout``: the run's errors by kind."""
        counts = {"non-2xx": self.non_2xx, **self.socket}
        return ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)


Runs = dict[str, list[WrkRun]]


def lua_script() -> str:
    """The ``wrk`` script: requests rotate over the client addresses (each thread from
    its own offset); ``done`` prints :data:`MARK` and the totals as JSON, non-2xx
    answers counted by ``response``."""
    addresses = ", ".join(f'"{client_address(n)}"' for n in range(CLIENTS))
    percentiles = ", ".join(str(p) for p in PERCENTILES)
    return f"""
local addresses = {{{addresses}}}
local threads = {{}}

function setup(thread)
  thread:set("first", #threads * 397)
  table.insert(threads, thread)
end

function init(args)
  prepared = {{}}
  for i, address in ipairs(addresses) do
    prepared[i] = wrk.format(nil, nil, {{["X-Forwarded-For"] = address}})
  end
  n = first
  non_2xx = 0
end

function request()
  n = n + 1
  return prepared[n % #prepared + 1]
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non_2xx = non_2xx + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, thread in ipairs(threads) do
    bad = bad + thread:get("non_2xx")
  end
  local e = summary.errors
  local percentiles = {{}}
  for _, p in ipairs({{{percentiles}}}) do
    table.insert(percentiles, string.format("%d", latency:percentile(p)))
  end
  io.write(string.format(
    '{MARK}{{"requests": %d, "us": %d, "non_2xx": %d, "connect": %d, "read": %d, '
      .. '"write": %d, "timeout": %d, "latency": [%s]}}\\n',
    summary.requests, summary.duration, bad, e.connect, e.read, e.write, e.timeout,
    table.concat(percentiles, ", ")))
end
"""


def run_wrk(ctx: Context, url: str, script: Path, seconds: int, cpu: int | None) -> WrkRun:
    """One ``wrk`` run of ``seconds`` against ``url`` from an empty Redis (but for the
    policy table's version), pinned to ``cpu``."""
    flush_counts(ctx)
    command = [
        *pinned(cpu),
        "wrk",
        f"--threads={THREADS}",
        f"--connections={CONNECTIONS}",
        f"--duration={seconds}s",
        f"--timeout={TIMEOUT}s",
        f"--script={script}",
        url,
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=seconds + TIMEOUT + 30, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    found = json.loads(lines[-1].removeprefix(MARK))
    return WrkRun(
        requests=found["requests"],
        seconds=found["us"] / 1e6,
        non_2xx=found["non_2xx"],
        socket={k: found[k] for k in ("connect", "read", "write", "timeout") if found[k]},
        keys=int(ctx.client().dbsize()),
        latency=tuple(float(us) for us in found.get("latency", ())),
    )


def measure(ctx: Context, where: Placement, seconds: int) -> Runs:
    """A warm-up run of each view, then ``ctx.runs`` rounds of one run per view, the
    order rotating; gunicorn is stopped before returning."""
    runs: Runs = {view.label: [] for view in VIEWS}
    with tempfile.TemporaryDirectory(prefix="ratelimits-bench-wrk-") as tmp:
        script = Path(tmp) / "clients.lua"
        script.write_text(lua_script())
        server = Gunicorn(where.server_cpu, WORKERS)
        try:
            server.wait_ready(VIEWS[0].path)
            base = f"http://127.0.0.1:{server.port}"
            for view in VIEWS:
                run_wrk(ctx, base + view.path, script, WARMUP_SECONDS, where.client_cpu)
            for turn in range(ctx.runs):
                shift = turn % len(VIEWS)
                for view in (*VIEWS[shift:], *VIEWS[:shift]):
                    run = run_wrk(ctx, base + view.path, script, seconds, where.client_cpu)
                    runs[view.label].append(run)
        finally:
            server.stop()
            flush_counts(ctx)
    return runs


def run(ctx: Context) -> Section:
    """The section: measured, or a note that ``wrk`` is missing."""
    if shutil.which("wrk") is None:
        return Section(
            TITLE,
            "Not measured: `wrk` is not on `PATH`. Install `wrk`, then run "
            "`python -m bench --only wrk`.",
            [Target(TARGET_NAME, "not measured: wrk is not installed", f"<= {TARGET}x", None)],
        )
    seconds = QUICK_SECONDS if ctx.quick else SECONDS
    where = placements(ctx)[0]
    install([LIMIT], list(ALGORITHMS))
    try:
        runs = measure(ctx, where, seconds)
    finally:
        uninstall()
    rps = {label: median(run.rps for run in found) for label, found in runs.items()}
    return Section(
        TITLE,
        describe(ctx, where, runs, rps, seconds),
        [target(runs, rps)],
        [
            Chart(
                TITLE,
                "requests per second (median)",
                [(view.label, rps[view.label]) for view in VIEWS],
            )
        ],
    )


def added_us(rps: dict[str, float], label: str) -> float | None:
    """Server time per request ``label``'s throttle adds, in µs (``None`` without rates)."""
    if not rps[label] or not rps[BASE]:
        return None
    return 1e6 / rps[label] - 1e6 / rps[BASE]


def target(runs: Runs, rps: dict[str, float]) -> Target:
    ours, drf = added_us(rps, OURS), added_us(rps, DRF)
    flawed = sum(1 for found in runs.values() for run in found if run.errors)
    if ours is None or drf is None or drf <= 0:
        return Target(TARGET_NAME, "n/a (no positive DRF added time)", f"<= {TARGET}x", None)
    measured = f"{ours / drf:.2f}x ({ours:+.0f} µs vs {drf:+.0f} µs per request)"
    if flawed:
        measured += f"; not judged: {flawed} runs had errors"
    return Target(TARGET_NAME, measured, f"<= {TARGET}x", None if flawed else ours / drf <= TARGET)


def latency_rows(runs: Runs) -> list[list[str]]:
    """Per view: the median over rounds of its latency at each percentile minus the
    unthrottled view's in the same round (the unthrottled view's own latency first)."""
    base = runs[BASE]
    if not base or not all(run.latency for found in runs.values() for run in found):
        return []
    count = len(PERCENTILES)
    rows = [
        [
            f"{BASE} (its own latency, µs)",
            *(f"{median(run.latency[i] for run in base):.0f}" for i in range(count)),
        ]
    ]
    for view in VIEWS[1:]:
        pairs = list(zip(runs[view.label], base, strict=True))
        added = [median(r.latency[i] - b.latency[i] for r, b in pairs) for i in range(count)]
        rows.append([view.label, *(f"{us:+.0f}" for us in added)])
    return rows


def describe(
    ctx: Context, where: Placement, runs: Runs, rps: dict[str, float], seconds: int
) -> str:
    drf = added_us(rps, DRF)
    rows = []
    for view in VIEWS:
        found = runs[view.label]
        added = added_us(rps, view.label)
        errors = [f"round {n}: {r.problems()}" for n, r in enumerate(found, 1) if r.errors]
        rows.append(
            [
                view.label,
                f"{rps[view.label]:,.0f}",
                "" if view.label == BASE or added is None else f"{added:+.0f}",
                f"{added / drf:.2f}x" if view.label != BASE and added is not None and drf else "",
                ", ".join(f"{run.rps:,.0f}" for run in found),
                f"{sum(run.requests for run in found):,}",
                f"{median(run.keys for run in found):,.0f}",
                "; ".join(errors) or "none",
            ]
        )
    table = markdown_table(
        [
            "view",
            "requests/s (median)",
            "µs added per request",
            "added vs DRF's",
            "each round",
            "requests",
            "Redis keys after a run",
            "errors (flagged)",
        ],
        rows,
    )
    percentiles = latency_rows(runs)
    latency_table = (
        markdown_table(["view", *(f"p{p:g}" for p in PERCENTILES)], percentiles)
        if percentiles
        else "Not read: this wrk reported no latency percentiles."
    )
    return "\n".join(
        [
            f"Median of {ctx.runs} round{'s' if ctx.runs > 1 else ''}; in each, `wrk` "
            f"drives every view for {seconds} s (the order rotating), after a warm-up run "
            "of each. The µs added is 1/rate - 1/rate(unthrottled): server time per "
            "request at the server's total throughput. Every request must be admitted: a "
            "run with non-2xx answers or socket errors is listed in the last column.",
            "",
            table,
            "",
            "Latency added per request under the same load, µs (`wrk`'s percentiles of each "
            "run, the view's minus the unthrottled view's in the same round, median over "
            "rounds; the first row: the unthrottled view's own). Under a closed loop of "
            f"{CONNECTIONS} connections on {WORKERS} workers a request's latency includes "
            "its wait for a free worker, so these grow with the time every other request "
            "takes too.",
            "",
            latency_table,
            "",
            "How it was measured:",
            "",
            f"- gunicorn: {WORKERS} `gthread` workers, 1 thread each (keep-alive), the "
            "benchmark's settings and database; the views are twins but for the "
            f"throttle. `wrk`: {THREADS} threads, {CONNECTIONS} keep-alive connections, "
            f"`-d {seconds}s`, `--timeout {TIMEOUT}s`; its Lua script puts one of "
            f"{CLIENTS:,} client addresses in `X-Forwarded-For` per request, in turn (one "
            "trusted proxy; DRF reads the header too).",
            f"- Placement: {where.text} (the load client is `wrk`).",
            f"- Throttles: DRF `AnonRateThrottle` at {LIMIT:,}/hour on django-redis; the "
            f"`limits` moving window at {LIMIT:,}/hour; PolicyThrottle with one policy of "
            f"each algorithm keyed by `ip`, {LIMIT:,} per {WINDOW} s (the target: "
            f"`{ALGORITHM}`). All on the same redis-server, flushed before each run (the policy "
            "table's version kept); the keys column is what a run left in it (one per client "
            "counted, plus the policy table's version; a request of the previous run still "
            "in flight at the flush may add one).",
        ]
    )


__all__: Sequence[str] = ("run",)
