"""Per-request overhead of each limiter over an unthrottled DRF view, in process.

Each request goes through Django's full handler (the middleware of
:mod:`bench.settings`, URL resolution, the DRF view) with ``BaseHandler.get_response``,
as a WSGI server would call it, minus the socket. A contender's overhead is its time per
request minus the unthrottled view's in the same run; the figure is the median over
``ctx.runs`` runs. Within a run the contenders take turns (the order rotates from run to
run), so drift hits them all alike, after a warm-up of each.

Every measured request must be admitted (a 429 costs something else): the limiters are
set to ``limit`` per hour per client address, and a client sends at most ``limit``
requests. Clients are ``REMOTE_ADDR`` values sent to in turn (one, or 1,000); once each
has sent ``limit`` requests, the next requests come from fresh addresses (a new
generation of clients), so at limit 5 with one client every fifth request starts a new
key. Redis is flushed between cells (limit x clients), keeping the policy table's
version stamp so that no worker reloads its table.
"""

from __future__ import annotations

import gc
import ipaddress
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.common import Chart, Context, Section, Target, markdown_table, median

LIMITS = (5, 100, 1000)
CLIENTS = (1, 1000)
#: Seconds: long enough that nothing expires during a benchmark.
WINDOW = 3600
#: Rounds per run: each contender sends its share of a run's requests in each.
SLICES = 10
#: The chart's cell.
CHART_CELL = (100, 1)
FIRST_ADDRESS = int(ipaddress.IPv4Address("10.0.0.0"))
#: Client addresses each cell may use (its own range of 10.0.0.0/8).
CELL_ADDRESSES = 1 << 20


def algorithms() -> list[str]:
    """The rate algorithms this version of the app has (compact_log when present).
    ``concurrency`` is left out: its slot is given back after the response, which this
    module's requests never close; :mod:`bench.afterwards` measures it with its give-back."""
    from ratelimits.choices import AlgorithmChoice
    from ratelimits.engine.keys.names import ALGORITHM_SUFFIX

    return [a for a in ALGORITHM_SUFFIX if a in AlgorithmChoice.values and a != "concurrency"]


@dataclass(frozen=True)
class Contender:
    """One limiter as the benchmark calls it."""

    label: str
    #: ``{limit}`` is replaced by the cell's limit.
    path: str
    kind: str  # "none", "policy", "drf_anon", "drf_user", "djrl", "limits", "smart"
    algorithm: str = ""
    policies: int = 0

    def url(self, limit: int) -> str:
        return self.path.format(limit=limit)


def policy_scope(algorithm: str, policies: int, limit: int | str) -> str:
    return f"bench{policies}-{algorithm}-{limit}"


def contenders(algorithm_names: Sequence[str] | None = None) -> list[Contender]:
    """The unthrottled baseline first, then every limiter compared."""
    found = [Contender("unthrottled DRF view", "/none/{limit}/", "none")]
    for algorithm in algorithm_names if algorithm_names is not None else algorithms():
        for policies in (1, 3):
            noun = "policy" if policies == 1 else "policies"
            found.append(
                Contender(
                    f"PolicyThrottle {algorithm}, {policies} {noun}",
                    "/policy/" + policy_scope(algorithm, policies, "{limit}") + "/",
                    "policy",
                    algorithm,
                    policies,
                )
            )
    found += [
        Contender("DRF AnonRateThrottle", "/drf-anon/{limit}/", "drf_anon"),
        Contender("DRF UserRateThrottle", "/drf-user/{limit}/", "drf_user"),
        Contender("django-ratelimit", "/djrl/{limit}/", "djrl"),
        Contender("limits moving window", "/limits-moving/{limit}/", "limits"),
        Contender("limits sliding window counter", "/limits-counter/{limit}/", "limits"),
        Contender("django-smart-ratelimit", "/smart/{limit}/", "smart"),
    ]
    return found


def install(limits: Iterable[int], algorithm_names: Sequence[str] | None = None) -> None:
    """Create the policies (keyed by IP, ``limit`` per :data:`WINDOW`, matched by the
    view's ``throttle_scope``) and django-smart-ratelimit's rules for ``limits``."""
    from django_smart_ratelimit.models import RateLimitRule

    from ratelimits.models import Policy

    names = algorithm_names if algorithm_names is not None else algorithms()
    for limit in limits:
        for algorithm in names:
            for policies in (1, 3):
                scope = policy_scope(algorithm, policies, limit)
                for n in range(policies):
                    Policy.objects.update_or_create(
                        name=scope if policies == 1 else f"{scope}-{n}",
                        defaults={
                            "endpoint": scope,
                            "algorithm": algorithm,
                            "limit": limit,
                            "window": WINDOW,
                            "key": "ip",
                        },
                    )
        RateLimitRule.objects.update_or_create(
            name=f"bench-{limit}",
            defaults={
                "path_pattern": f"^/smart/{limit}/$",
                "method": "GET",
                "rate": f"{limit}/h",
                "key": "ip",
            },
        )


def uninstall() -> None:
    """Remove what :func:`install` created."""
    from django_smart_ratelimit.models import RateLimitRule

    from ratelimits.models import Policy

    Policy.objects.filter(name__startswith="bench").delete()
    RateLimitRule.objects.filter(name__startswith="bench-").delete()


def flush_counts(ctx: Context) -> None:
    """Empty Redis but keep the policy table's version stamp (no table reload)."""
    from ratelimits.conf import app_settings
    from ratelimits.engine.keys.names import version_key

    client = ctx.client()
    key = version_key(app_settings.KEY_PREFIX)
    stamp = client.get(key)
    client.flushdb()
    if stamp is not None:
        client.set(key, stamp)


class Clients:
    """Client addresses in turn, ``count`` at a time, each sending at most ``limit``
    requests; then a fresh generation of ``count`` addresses."""

    def __init__(self, count: int, limit: int, start: int = 0) -> None:
        self.count, self.limit = count, limit
        self.base = start
        self.sent = 0

    def take(self, n: int) -> list[str]:
        addresses = []
        for _ in range(n):
            if self.sent == self.count * self.limit:
                self.base += self.count
                self.sent = 0
            offset = self.base + self.sent % self.count
            addresses.append(str(ipaddress.IPv4Address(FIRST_ADDRESS + offset)))
            self.sent += 1
        return addresses


class InProcess:
    """Requests through Django's handler and middleware, without a server."""

    def __init__(self) -> None:
        from django.core.handlers.base import BaseHandler
        from django.test import RequestFactory

        self.handler = BaseHandler()
        self.handler.load_middleware()
        self.factory = RequestFactory()

    def environs(self, path: str, addresses: Sequence[str]) -> list[dict[str, Any]]:
        return [
            self.factory._base_environ(PATH_INFO=path, REQUEST_METHOD="GET", REMOTE_ADDR=a)
            for a in addresses
        ]

    def send(self, environs: Sequence[dict[str, Any]]) -> float:
        """Seconds spent answering ``environs``; raises unless every answer is 200."""
        from django.core.handlers.wsgi import WSGIRequest

        get_response = self.handler.get_response
        statuses = []
        started = time.perf_counter()
        for environ in environs:
            statuses.append(get_response(WSGIRequest(dict(environ))).status_code)
        elapsed = time.perf_counter() - started
        bad = [s for s in statuses if s != 200]
        if bad:
            path = environs[0]["PATH_INFO"]
            raise RuntimeError(f"{path}: {len(bad)} of {len(statuses)} answers not 200: {bad[:5]}")
        return elapsed


@dataclass
class Cell:
    limit: int
    clients: int
    #: Microseconds per request of the baseline, per run.
    baseline: list[float]
    #: Overhead in microseconds per contender label, per run.
    overhead: dict[str, list[float]]

    @property
    def name(self) -> str:
        return f"limit {self.limit}, {self.clients} client{'s' if self.clients > 1 else ''}"

    def median(self, label: str) -> float:
        return median(self.overhead[label])


def measure_cell(
    ctx: Context,
    client: InProcess,
    contenders_: Sequence[Contender],
    limit: int,
    clients: int,
    requests: int,
    warmup: int,
    first_client: int = 0,
) -> Cell:
    """One cell: every contender warmed up, then ``ctx.runs`` runs of ``requests`` each.

    A run is :data:`SLICES` rounds in which every contender sends its share in turn, the
    order rotating each round, so that drift within a run hits every contender alike.
    Client addresses start at ``first_client`` (an offset from 10.0.0.0): each cell gets
    its own, because a worker may remember a key's denial past a flush of Redis."""
    flush_counts(ctx)
    pools = {c.label: Clients(clients, limit, first_client) for c in contenders_}
    for contender in contenders_:
        client.send(client.environs(contender.url(limit), pools[contender.label].take(warmup)))
    gc.collect()
    gc.freeze()  # what the warm-up left stays out of the collections timed below
    per_request: dict[str, list[float]] = {c.label: [] for c in contenders_}
    share = max(1, requests // SLICES)
    turn = 0
    for _ in range(ctx.runs):
        spent = dict.fromkeys(per_request, 0.0)
        for _ in range(SLICES):
            turn += 1
            order = [
                *contenders_[turn % len(contenders_) :],
                *contenders_[: turn % len(contenders_)],
            ]
            for contender in order:
                addresses = pools[contender.label].take(share)
                spent[contender.label] += client.send(
                    client.environs(contender.url(limit), addresses)
                )
        for label, seconds in spent.items():
            per_request[label].append(seconds / (share * SLICES) * 1e6)
    gc.unfreeze()
    baseline = per_request[contenders_[0].label]
    overhead = {
        c.label: [t - b for t, b in zip(per_request[c.label], baseline, strict=True)]
        for c in contenders_[1:]
    }
    return Cell(limit, clients, baseline, overhead)


def ping_microseconds(ctx: Context, calls: int) -> float:
    """Median microseconds of a Redis ``PING`` from this process (one round trip)."""
    client = ctx.client()
    client.ping()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        client.ping()
        times.append(time.perf_counter() - started)
    return median(times) * 1e6


def round_trip_note(ctx: Context) -> str:
    """What one Redis round trip costs here, in this placement and, when Redis has a CPU of
    its own, with Redis moved to this process's CPU for the measurement."""
    calls = ctx.scaled(2000, 50)
    here = ping_microseconds(ctx, calls)
    note = f"One Redis round trip (`PING`, median of {calls}) costs {here:.0f} µs here"
    process = ctx.redis.process
    if ctx.client_cpu is None or ctx.redis_cpu == ctx.client_cpu or process is None:
        return note + "."
    os.sched_setaffinity(process.pid, {ctx.client_cpu})
    try:
        same = ping_microseconds(ctx, calls)
    finally:
        os.sched_setaffinity(process.pid, {ctx.redis_cpu})
    return (
        note + f" (Redis on another CPU), {same:.0f} µs with Redis on this process's CPU: "
        "waking a process on another CPU is slow on this machine, so each round trip "
        "weighs more than the CPU time it takes."
    )


def run(ctx: Context) -> Section:
    requests = ctx.scaled(400, SLICES)
    warmup = ctx.scaled(100, 5)
    names = algorithms()
    lineup = contenders(names)
    install(LIMITS, names)
    client = InProcess()
    cells = []
    try:
        note = round_trip_note(ctx)
        for limit in LIMITS:
            for clients in CLIENTS:
                first = len(cells) * CELL_ADDRESSES
                cells.append(
                    measure_cell(ctx, client, lineup, limit, clients, requests, warmup, first)
                )
    finally:
        uninstall()
        flush_counts(ctx)
    return Section(
        "Per-request overhead (in process)",
        describe(ctx, cells, lineup, requests, warmup) + "\n- " + note,
        targets(cells, names),
        [chart(cells, lineup)],
    )


def cell_at(cells: Sequence[Cell], limit: int, clients: int) -> Cell:
    return next(c for c in cells if (c.limit, c.clients) == (limit, clients))


def describe(
    ctx: Context, cells: Sequence[Cell], lineup: Sequence[Contender], requests: int, warmup: int
) -> str:
    header = ["limiter", *(c.name for c in cells)]
    rows: list[list[object]] = [
        ["unthrottled DRF view (µs per request)", *(f"{median(c.baseline):.0f}" for c in cells)]
    ]
    for contender in lineup[1:]:
        rows.append([contender.label, *(f"+{c.median(contender.label):.1f}" for c in cells)])
    anon = "DRF AnonRateThrottle"
    ratio_rows: list[list[object]] = []
    for contender in lineup[1:]:
        if contender.kind == "policy" and contender.policies == 1:
            ratio_rows.append(
                [
                    contender.label,
                    *(_ratio(c.median(contender.label), c.median(anon)) for c in cells),
                ]
            )
    return "\n".join(
        [
            f"Time per request added to an unthrottled DRF view, in microseconds: median of "
            f"{ctx.runs} runs of {requests} requests per contender and cell (each run in "
            f"{SLICES} rounds, every contender in turn), after {warmup} warm-up requests "
            "each; the first row is the unthrottled view's own time.",
            "",
            markdown_table(header, rows),
            "",
            "PolicyThrottle's overhead over DRF AnonRateThrottle's (same cell, same runs):",
            "",
            markdown_table(header, ratio_rows),
            "",
            "How it was measured:",
            "",
            "- Django's handler with the demo's middleware (sessions, CSRF, auth, messages, "
            "RateLimit headers) called in process (`BaseHandler.get_response` on a "
            "`WSGIRequest`, as a WSGI server calls it); anonymous GETs, JSON renderer.",
            "- Every limiter counts by client address, `limit` per hour (PolicyThrottle: "
            f"policies with `key=ip`, `window={WINDOW}`, matched by the view's "
            "`throttle_scope`; with 3 policies, three such policies on one view). DRF's rates "
            "are per second, minute, hour or day only, so DRF gets `limit/hour`. "
            "django-ratelimit: `@ratelimit(key='ip', rate='<limit>/h', block=True)` on the "
            "view's `get`. `limits`: `RedisStorage` on the same Redis, wrapped in a DRF "
            "throttle. django-smart-ratelimit: its middleware on its Redis backend with a "
            "database `RateLimitRule` (`<limit>/h`, key `ip`) per limit. DRF's "
            "UserRateThrottle counts anonymous requests by address, as here. The views of "
            "DRF's throttles, django-ratelimit and `limits` are built per limit and reached "
            "through a one-line dispatch on the URL's limit (well under a microsecond).",
            "- Every measured request is admitted: clients take turns and each sends at most "
            "`limit` requests; then fresh addresses take over (at limit 5 and one client, "
            "a new key every 5 requests); no address is used in two cells. With one client "
            "the keys are hot and, for the logs, grow up to `limit` entries; with 1,000 "
            "clients each request touches another client's keys.",
            "- The baseline runs in every run; an overhead is (contender - baseline) per run, "
            "then the median. The order rotates each round. Redis: flushed between cells. "
            "The garbage collector is left on; what the warm-up allocated is frozen.",
        ]
    )


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs > 0 else "n/a"


def targets(cells: Sequence[Cell], names: Sequence[str]) -> list[Target]:
    found = []
    versus = [
        ("DRF AnonRateThrottle", 0.5, False),
        ("django-ratelimit", 0.7, False),
        ("limits moving window", 1.0, True),  # below it
    ]
    for algorithm in names:
        one = f"PolicyThrottle {algorithm}, 1 policy"
        three = f"PolicyThrottle {algorithm}, 3 policies"
        for other, bound, strict in versus:
            ratios = [(c.median(one) / c.median(other), c) for c in cells if c.median(other) > 0]
            found.append(_worst(f"{algorithm} overhead vs {other}'s", ratios, bound, strict))
        ratios = [(c.median(three) / c.median(one), c) for c in cells if c.median(one) > 0]
        found.append(_worst(f"{algorithm}: 3 matching policies vs 1", ratios, 1.3))
    return found


def _worst(
    name: str, ratios: list[tuple[float, Cell]], bound: float, strict: bool = False
) -> Target:
    wanted = f"{'<' if strict else '<='} {bound}x"
    if not ratios:
        return Target(name, "n/a (no positive overhead to compare)", wanted, None)
    worst, cell = max(ratios, key=lambda pair: pair[0])
    best = min(r for r, _ in ratios)
    measured = f"{best:.2f}x to {worst:.2f}x (worst: {cell.name})"
    met = worst < bound if strict else worst <= bound
    return Target(name, measured, f"{wanted} in every cell", met)


def chart(cells: Sequence[Cell], lineup: Sequence[Contender]) -> Chart:
    cell = cell_at(cells, *CHART_CELL)
    return Chart(
        f"Overhead per request over an unthrottled DRF view ({cell.name}, in process)",
        "µs per request (median)",
        [(c.label, cell.median(c.label)) for c in lineup[1:]],
    )
