"""The async path beside the sync one, in process: what a request pays on each.

- **The engine call**: ``await adecide(checks)`` (``redis.asyncio`` connections of the
  running loop) against ``decide(checks)`` (the thread's held connection), one
  ``sliding_counter`` policy, 1,000 clients under their limit, on the same server; the
  ``limits`` library's moving window ``hit()`` the same way, sync (``RedisStorage``)
  and async (``limits.aio``, ``async+redis://``); and a ``PING`` each way, the round
  trip's floor. The async calls run one at a time on an event loop kept for the whole
  module, and then :data:`IN_FLIGHT` at a time (time per call: the wall time over the
  calls).
- **The middleware face**: ``RateLimitMiddleware`` on a plain Django view through
  Django's WSGI handler (a sync view: ``process_view``, ``decide``) and through its ASGI
  handler (an async view: ``aprocess_view``, ``adecide``, on the event loop), each
  minus the same handler's unthrottled twin view. The anchors, through the same
  handlers, each minus its own twin: DRF's ``AnonRateThrottle`` on django-redis,
  django-ratelimit and the ``limits`` moving window (the DRF views of
  :mod:`bench.overhead`, their twin the unthrottled DRF view), and ``limits.aio`` in an
  async view (its twin the unthrottled async view). Under the ASGI handler DRF's views,
  being sync, run in a worker thread, as Django runs any sync view there.
"""

from __future__ import annotations

import asyncio
import gc
import io
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.common import Chart, Context, Section, markdown_table, median
from bench.overhead import FIRST_ADDRESS, Clients, InProcess, flush_counts

ALGORITHM = "sliding_counter"
#: Per client address and hour: no client comes near it, every request is admitted.
LIMIT = 1_000_000
WINDOW = 3600
CLIENTS = 1000
#: Addresses from 10.160.0.0: a range of their own (each contender gets ``CLIENTS``).
FIRST_CLIENT = 160 << 16
#: Async calls in flight at once, in the second measurement of each async call.
IN_FLIGHT = 16
#: Rounds per run: each contender sends its share of a run's requests in each, in turn.
SLICES = 10
#: The policies of the middleware face: a path glob for each handler's limited view.
FACE_POLICIES = {
    "bench-mw-sync": "/mw-sync/*",
    "bench-mw-async": "/mw-async/*",
    "bench-ninja-async": "/ninja/throttled/*",
}

WSGI, ASGI = "WSGI", "ASGI"
MIDDLEWARE = "RateLimitMiddleware"
NINJA = "ninja PolicyThrottle, async operation"
DRF_ANON = "DRF AnonRateThrottle"


def address(n: int) -> str:
    """The ``n``-th client address of this module (``n`` modulo :data:`CLIENTS`)."""
    value = FIRST_ADDRESS + FIRST_CLIENT + n % CLIENTS
    return f"{value >> 24}.{(value >> 16) & 255}.{(value >> 8) & 255}.{value & 255}"


# --- the engine call ------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineCall:
    """One call measured: ``sync(i)`` or ``asynchronous(i)`` for the ``i``-th call."""

    label: str
    sync: Callable[[int], object] | None = None
    asynchronous: Callable[[int], Awaitable[object]] | None = None


def engine_calls(ctx: Context) -> list[EngineCall]:
    """The engine's two calls, the ``limits`` library's two, and a ``PING`` each way."""
    import redis.asyncio
    from limits import RateLimitItemPerHour
    from limits.aio.storage import RedisStorage as AsyncRedisStorage
    from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindow
    from limits.storage import RedisStorage
    from limits.strategies import MovingWindowRateLimiter

    from ratelimits.engine import limiter
    from ratelimits.engine.policy.compiled import Check, CompiledPolicy

    policy = CompiledPolicy.build(
        name="bench-async-engine", endpoint="x", algorithm=ALGORITHM, limit=LIMIT, window=WINDOW
    )
    checks = [[Check(policy, f"ip:{address(n)}")] for n in range(CLIENTS)]
    item = RateLimitItemPerHour(LIMIT)
    moving = MovingWindowRateLimiter(RedisStorage(ctx.url))
    moving_aio = AsyncMovingWindow(AsyncRedisStorage(f"async+{ctx.url}", implementation="redispy"))
    sync_client = ctx.client()
    async_client = redis.asyncio.Redis(host="127.0.0.1", port=ctx.redis.port)

    def decide(i: int) -> object:
        return limiter.decide(checks[i % CLIENTS])

    async def adecide(i: int) -> object:
        return await limiter.adecide(checks[i % CLIENTS])

    def hit(i: int) -> object:
        return moving.hit(item, "bench-sync", address(i))

    async def ahit(i: int) -> object:
        return await moving_aio.hit(item, "bench-aio", address(i))

    async def aping(i: int) -> object:
        return await async_client.ping()

    return [
        EngineCall("decide (sync)", sync=decide),
        EngineCall("await adecide", asynchronous=adecide),
        EngineCall("limits moving window hit (sync)", sync=hit),
        EngineCall("await limits.aio moving window hit", asynchronous=ahit),
        EngineCall("PING (redis-py)", sync=lambda i: sync_client.ping()),
        EngineCall("await PING (redis.asyncio)", asynchronous=aping),
    ]


def per_call_sync(call: Callable[[int], object], calls: int, start: int) -> float:
    """Microseconds per call of ``call(i)``, one after another."""
    started = time.perf_counter()
    for i in range(start, start + calls):
        call(i)
    return (time.perf_counter() - started) / calls * 1e6


async def per_call_async(
    call: Callable[[int], Awaitable[object]], calls: int, start: int, width: int
) -> float:
    """Microseconds per call of ``await call(i)``, ``width`` coroutines at a time (each
    awaiting its calls one after another): the wall time over the calls."""

    async def worker(first: int) -> None:
        for i in range(first, start + calls, width):
            await call(i)

    started = time.perf_counter()
    await asyncio.gather(*(worker(start + w) for w in range(width)))
    return (time.perf_counter() - started) / calls * 1e6


#: A measured row of the engine table: its label and, per run, µs per call.
Figures = dict[str, list[float]]


def measure_engine(ctx: Context, loop: asyncio.AbstractEventLoop) -> Figures:
    """Every engine call, one at a time (and the async ones :data:`IN_FLIGHT` at a time),
    ``ctx.runs`` runs after a warm-up, the order rotating from run to run."""
    calls = ctx.scaled(3000, 100)
    found = engine_calls(ctx)
    figures: Figures = {}
    measures: list[tuple[str, Callable[[int], float]]] = []
    for call in found:
        if call.sync is not None:
            sync = call.sync
            measures.append((call.label, lambda start, f=sync: per_call_sync(f, calls, start)))
        else:
            assert call.asynchronous is not None
            for width in (1, IN_FLIGHT):
                label = call.label if width == 1 else f"{call.label}, {width} in flight"
                measures.append(
                    (
                        label,
                        lambda start, f=call.asynchronous, w=width: loop.run_until_complete(
                            per_call_async(f, calls, start, w)
                        ),
                    )
                )
    for _, measure in measures:  # warm: connections, the code loaded, the first keys
        measure(0)
    gc.collect()
    gc.freeze()
    start = 0
    for run in range(ctx.runs):
        shift = run % len(measures)
        for label, measure in (*measures[shift:], *measures[:shift]):
            start += calls
            figures.setdefault(label, []).append(measure(start))
    gc.unfreeze()
    return figures


# --- the middleware face --------------------------------------------------------------------


@dataclass(frozen=True)
class Contender:
    """A view measured through one handler; ``twin`` is the label of the unthrottled
    view it is measured against (``None``: it is one)."""

    label: str
    handler: str
    path: str
    twin: str | None = None

    @property
    def key(self) -> str:
        return f"{self.handler}: {self.label}"


def lineup() -> list[Contender]:
    plain_sync = Contender("unthrottled plain view", WSGI, f"/plain-sync/{LIMIT}/")
    drf_wsgi = Contender("unthrottled DRF view", WSGI, f"/none/{LIMIT}/")
    plain_async = Contender("unthrottled async view", ASGI, f"/plain-async/{LIMIT}/")
    drf_asgi = Contender("unthrottled DRF view", ASGI, f"/none/{LIMIT}/")
    ninja_async = Contender("unthrottled ninja async operation", ASGI, f"/ninja/plain/{LIMIT}")
    return [
        plain_sync,
        drf_wsgi,
        Contender(MIDDLEWARE, WSGI, f"/mw-sync/{LIMIT}/", plain_sync.key),
        Contender(DRF_ANON, WSGI, f"/drf-anon/{LIMIT}/", drf_wsgi.key),
        Contender("django-ratelimit", WSGI, f"/djrl/{LIMIT}/", drf_wsgi.key),
        Contender("limits moving window", WSGI, f"/limits-moving/{LIMIT}/", drf_wsgi.key),
        plain_async,
        drf_asgi,
        Contender(MIDDLEWARE, ASGI, f"/mw-async/{LIMIT}/", plain_async.key),
        Contender("limits.aio moving window", ASGI, f"/limits-aio/{LIMIT}/", plain_async.key),
        Contender(DRF_ANON, ASGI, f"/drf-anon/{LIMIT}/", drf_asgi.key),
        ninja_async,
        Contender(NINJA, ASGI, f"/ninja/throttled/{LIMIT}", ninja_async.key),
    ]


class InProcessAsgi:
    """Requests through Django's ASGI handler (its async middleware chain), without a
    server: ``get_response_async`` on an ``ASGIRequest``, on ``loop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        from django.core.handlers.asgi import ASGIHandler

        self.handler = ASGIHandler()  # loads the middleware for an async chain
        self.loop = loop

    def scopes(self, path: str, addresses: Sequence[str]) -> list[dict[str, Any]]:
        return [
            {
                "type": "http",
                "asgi": {"version": "3.0"},
                "http_version": "1.1",
                "method": "GET",
                "scheme": "http",
                "path": path,
                "raw_path": path.encode(),
                "query_string": b"",
                "root_path": "",
                "headers": [(b"host", b"testserver")],
                "client": (a, 0),
                "server": ("testserver", 80),
            }
            for a in addresses
        ]

    def send(self, scopes: Sequence[dict[str, Any]]) -> float:
        """Seconds spent answering ``scopes``; raises unless every answer is 200."""
        return self.loop.run_until_complete(self._send(scopes))

    async def _send(self, scopes: Sequence[dict[str, Any]]) -> float:
        from django.core.handlers.asgi import ASGIRequest

        get_response = self.handler.get_response_async
        statuses = []
        started = time.perf_counter()
        for scope in scopes:
            response = await get_response(ASGIRequest(dict(scope), io.BytesIO()))
            statuses.append(response.status_code)
        elapsed = time.perf_counter() - started
        bad = [s for s in statuses if s != 200]
        if bad:
            path = scopes[0]["path"]
            raise RuntimeError(f"{path}: {len(bad)} of {len(statuses)} answers not 200: {bad[:5]}")
        return elapsed


def install() -> None:
    from ratelimits.models import Policy

    for name, endpoint in FACE_POLICIES.items():
        Policy.objects.update_or_create(
            name=name,
            defaults={
                "endpoint": endpoint,
                "algorithm": ALGORITHM,
                "limit": LIMIT,
                "window": WINDOW,
                "key": "ip",
            },
        )


def uninstall() -> None:
    from ratelimits.models import Policy

    Policy.objects.filter(name__in=FACE_POLICIES).delete()


def measure_face(ctx: Context, loop: asyncio.AbstractEventLoop) -> Figures:
    """µs per request of every contender, per run: each warmed up, then ``ctx.runs``
    runs of :data:`SLICES` rounds in which every contender sends its share in turn."""
    requests = ctx.scaled(300, SLICES)
    warmup = ctx.scaled(100, 5)
    contenders = lineup()
    clients = {
        c.key: Clients(CLIENTS, LIMIT, FIRST_CLIENT + n * CLIENTS) for n, c in enumerate(contenders)
    }
    handlers = {WSGI: InProcess(), ASGI: InProcessAsgi(loop)}

    def send(contender: Contender, count: int) -> float:
        addresses = clients[contender.key].take(count)
        if contender.handler == WSGI:
            wsgi = handlers[WSGI]
            assert isinstance(wsgi, InProcess)
            return wsgi.send(wsgi.environs(contender.path, addresses))
        asgi = handlers[ASGI]
        assert isinstance(asgi, InProcessAsgi)
        return asgi.send(asgi.scopes(contender.path, addresses))

    for contender in contenders:
        send(contender, warmup)
    gc.collect()
    gc.freeze()
    figures: Figures = {c.key: [] for c in contenders}
    share = max(1, requests // SLICES)
    turn = 0
    for _ in range(ctx.runs):
        spent = dict.fromkeys(figures, 0.0)
        for _ in range(SLICES):
            turn += 1
            shift = turn % len(contenders)
            for contender in (*contenders[shift:], *contenders[:shift]):
                spent[contender.key] += send(contender, share)
        for key, seconds in spent.items():
            figures[key].append(seconds / (share * SLICES) * 1e6)
    gc.unfreeze()
    return figures


def added(figures: Figures, contender: Contender) -> float:
    """Median over runs of the µs ``contender`` adds over its twin (same run)."""
    assert contender.twin is not None
    pairs = zip(figures[contender.key], figures[contender.twin], strict=True)
    return median(t - b for t, b in pairs)


# --- the section ----------------------------------------------------------------------------


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs > 0 else "n/a"


def run(ctx: Context) -> Section:
    loop = asyncio.new_event_loop()
    install()
    try:
        flush_counts(ctx)
        engine = measure_engine(ctx, loop)
        flush_counts(ctx)
        face = measure_face(ctx, loop)
    finally:
        uninstall()
        flush_counts(ctx)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    contenders = lineup()
    return Section(
        "The async path beside the sync path (in process)",
        describe(ctx, engine, face, contenders),
        charts=[chart(face, contenders)],
    )


def describe(ctx: Context, engine: Figures, face: Figures, contenders: list[Contender]) -> str:
    us = {label: median(runs) for label, runs in engine.items()}
    engine_rows = [
        [label, f"{us[label]:.1f}", ", ".join(f"{v:.1f}" for v in runs)]
        for label, runs in engine.items()
    ]
    sync, asynchronous = us["decide (sync)"], us["await adecide"]
    flight = f"await adecide, {IN_FLIGHT} in flight"
    aio_flight = f"await limits.aio moving window hit, {IN_FLIGHT} in flight"
    engine_ratios = [
        f"- `await adecide` over `decide`: {ratio(asynchronous, sync)}; over `await` "
        f"`limits.aio` `hit()`: {ratio(asynchronous, us['await limits.aio moving window hit'])}"
        f" (`decide` over `limits` `hit()`: "
        f"{ratio(sync, us['limits moving window hit (sync)'])}).",
        f"- The round trip alone, async over sync (`PING`): "
        f"{ratio(us['await PING (redis.asyncio)'], us['PING (redis-py)'])}; what `adecide` "
        f"adds to its `PING`: {asynchronous - us['await PING (redis.asyncio)']:.1f} µs, "
        f"`decide` to its own: {sync - us['PING (redis-py)']:.1f} µs.",
        f"- {IN_FLIGHT} in flight on one loop, per call: `adecide` {us[flight]:.1f} µs "
        f"({ratio(us[flight], asynchronous)} of one at a time), `limits.aio` "
        f"{us[aio_flight]:.1f} µs.",
    ]
    by_key = {c.key: c for c in contenders}
    face_rows = []
    for contender in contenders:
        own = median(face[contender.key])
        if contender.twin is None:
            face_rows.append([contender.handler, contender.label, f"{own:.0f}", "", ""])
            continue
        versus = by_key[f"{contender.handler}: {DRF_ANON}"]
        face_rows.append(
            [
                contender.handler,
                contender.label,
                f"{own:.0f}",
                f"+{added(face, contender):.1f}",
                ratio(added(face, contender), added(face, versus)),
            ]
        )

    def add(handler: str, label: str) -> float:
        return added(face, by_key[f"{handler}: {label}"])

    ours_wsgi, ours_asgi = add(WSGI, MIDDLEWARE), add(ASGI, MIDDLEWARE)
    face_ratios = [
        f"- RateLimitMiddleware's added time, ASGI (async view) over WSGI (sync view): "
        f"{ratio(ours_asgi, ours_wsgi)} ({ours_asgi:+.1f} µs vs {ours_wsgi:+.1f} µs).",
        f"- Under ASGI, over `limits.aio` in an async view: "
        f"{ratio(ours_asgi, add(ASGI, 'limits.aio moving window'))}; over DRF "
        f"AnonRateThrottle under ASGI: {ratio(ours_asgi, add(ASGI, DRF_ANON))}, under WSGI: "
        f"{ratio(ours_asgi, add(WSGI, DRF_ANON))}.",
        f"- The ninja PolicyThrottle on an async operation (its check on a worker thread, "
        f"the loop waiting: django-ninja calls throttles synchronously): "
        f"{add(ASGI, NINJA):+.1f} µs, {ratio(add(ASGI, NINJA), ours_asgi)} of "
        f"RateLimitMiddleware's on the loop.",
        f"- Under WSGI, over DRF AnonRateThrottle: {ratio(ours_wsgi, add(WSGI, DRF_ANON))}, "
        f"over django-ratelimit: {ratio(ours_wsgi, add(WSGI, 'django-ratelimit'))}, over "
        f"the `limits` moving window: {ratio(ours_wsgi, add(WSGI, 'limits moving window'))}.",
    ]
    calls = ctx.scaled(3000, 100)
    requests = ctx.scaled(300, SLICES)
    return "\n".join(
        [
            __doc__.split("\n\n", 1)[1].strip(),
            "",
            f"**The engine call**: µs per call, median of {ctx.runs} runs of {calls} calls "
            f"(the order rotating from run to run), {CLIENTS:,} clients under a limit of "
            f"{LIMIT:,} per hour.",
            "",
            markdown_table(["call", "µs per call (median)", "each run"], engine_rows),
            "",
            *engine_ratios,
            "",
            f"**The middleware face**: µs per request, median of {ctx.runs} runs of "
            f"{requests} requests per contender (each run in {SLICES} rounds, every contender "
            f"in turn); the added time is the contender's minus its twin's in the same run. "
            "The last column sets it against DRF AnonRateThrottle's under the same handler.",
            "",
            markdown_table(
                ["handler", "view", "µs per request", "added over its twin", "added vs DRF's"],
                face_rows,
            ),
            "",
            *face_ratios,
            "",
            "How it was measured:",
            "",
            "- WSGI: `BaseHandler.get_response` on a `WSGIRequest`, as a WSGI server calls "
            "it; ASGI: `ASGIHandler.get_response_async` on an `ASGIRequest`, awaited on one "
            "event loop kept for the module (the loop's connections stay open between "
            "requests, as in a served worker). The demo's middleware (sessions, CSRF, auth, "
            "messages, the RateLimit headers) in both chains; anonymous GETs.",
            f"- RateLimitMiddleware: a `{ALGORITHM}` policy keyed by `ip` per handler, "
            f"{LIMIT:,} per {WINDOW} s, matching the limited view's path by glob; every "
            "request is admitted. Each contender sends from addresses of its own, "
            f"{CLIENTS:,} in turn. `limits.aio`: `MovingWindowRateLimiter` on "
            "`async+redis://` (its redis-py implementation) in an async view.",
        ]
    )


def chart(face: Figures, contenders: list[Contender]) -> Chart:
    return Chart(
        "Added per request over the twin view, in process: WSGI and ASGI handlers",
        "µs per request (median)",
        [(c.key, added(face, c)) for c in contenders if c.twin is not None],
    )


__all__: Sequence[str] = ("run",)
