"""The hot path against its floor: Python beyond the round trip, Redis CPU per decision.

- **Python beyond the round trip**: ``PolicyThrottle.allow_request`` on a warm worker
  (1 and 3 ``sliding_counter`` policies, every request admitted, rotating client
  addresses), minus its own round trip, timed inside it (the send and the read of the
  one call). What is left is everything the throttle does around the round trip:
  matching, identities, keys, building the call, reading the verdict, the counts and
  the headers' data.
- **Redis CPU per decision**: the server's own microseconds per decide call (``INFO
  commandstats``, the outer call, which includes the commands the code runs), for each
  algorithm, against the ``limits`` library's moving-window ``hit()`` on the same server
  in the same run, both at 1,000 clients under their limit. And the fixed cost of a call
  with no keys (the call itself, reading the Redis clock and the reply).
- **The round trip against its floor** (A/B): the limiter's decide call for one
  ``sliding_counter`` policy (built from the request's checks, through the server's
  circuit breaker, sent on the thread's connection and read back) against the floor: the
  very same bytes written on a raw socket to the same server and the reply parsed by
  ``hiredis``, with nothing else around them, in alternate rounds.
- **The traffic record, on and off** (A/B): the same two figures for 1 ``sliding_counter``
  policy with ``RATELIMITS["TRAFFIC"]`` on and off, in alternate rounds. The record adds no
  Redis command to a request, so the Redis CPU per decision should not move; the Python
  added is the in-memory count of the levels a request crosses.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from redis.connection import AbstractConnection

from bench.common import DECIDE_COMMANDS, Context, Section, Target, markdown_table, median
from ratelimits.engine import limiter
from ratelimits.engine.decide_protocol import decide_call
from ratelimits.engine.policy.compiled import Check, CompiledPolicy
from ratelimits.engine.steps import drive, plan
from ratelimits.engine.store import caller, commands, connection
from ratelimits.engine.store.route import current

SCOPE = "hotpath"
ALGORITHMS = ("sliding_log", "compact_log", "sliding_counter", "fixed_window", "token_bucket")
#: Redis CPU per decision, at most this times the ``limits`` moving window's: the
#: counters at parity, the logs (which read and write a log entry) within 1.3x.
CPU_BOUNDS = {
    "sliding_log": 1.3,
    "compact_log": 1.3,
    "sliding_counter": 1.0,
    "fixed_window": 1.0,
    "token_bucket": 1.0,
}
#: Python beyond the round trip in ``allow_request``, µs, with 1 and with 3 policies.
BEYOND_BOUNDS_US = {1: 15.0, 3: 20.0}
FIXED_COST_BOUND_US = 2.0
#: The limiter's decide call, at most this times the raw socket + hiredis floor.
FLOOR_BOUND = 1.3
#: The traffic record: Redis CPU per decision with it on, at most this times off ...
TRAFFIC_CPU_BOUND = 1.10
#: ... and the Python it adds to a request, at most this many µs.
TRAFFIC_PYTHON_BOUND_US = 3.0
CLIENTS = 1000
LIMIT = 1_000_000


class _View:
    throttle_scope = SCOPE


def _address(n: int) -> str:
    return f"10.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}"


def _requests(count: int) -> list[Any]:
    from django.test import RequestFactory
    from rest_framework.request import Request

    factory = RequestFactory()
    found = []
    for n in range(count):
        raw = factory.get(f"/{SCOPE}/", REMOTE_ADDR=_address(n % CLIENTS))
        raw.resolver_match = None
        found.append(Request(raw))
    return found


def _timed(function: Callable[[int], object], calls: int) -> float:
    """Microseconds per call of ``function(i)`` for i in range(calls)."""
    started = time.perf_counter()
    for i in range(calls):
        function(i)
    return (time.perf_counter() - started) / calls * 1e6


@contextmanager
def timing_io(record: list[float]) -> Iterator[None]:
    """Add the seconds spent sending and reading to ``record[0]``: the caller's direct
    round trip on a plain connection, redis-py's send and read on any other (patched
    where they are defined, and put back as they were)."""
    send, read = AbstractConnection.send_packed_command, AbstractConnection.read_response
    direct = caller._round_trip

    def timed_direct(*args: Any) -> Any:
        started = time.perf_counter()
        try:
            return direct(*args)
        finally:
            record[0] += time.perf_counter() - started

    def timed_send(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return send(self, *args, **kwargs)
        finally:
            record[0] += time.perf_counter() - started

    def timed_read(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return read(self, *args, **kwargs)
        finally:
            record[0] += time.perf_counter() - started

    AbstractConnection.send_packed_command = timed_send  # type: ignore[method-assign]
    AbstractConnection.read_response = timed_read  # type: ignore[method-assign]
    caller._round_trip = timed_direct
    try:
        yield
    finally:
        AbstractConnection.send_packed_command = send  # type: ignore[method-assign]
        AbstractConnection.read_response = read  # type: ignore[method-assign]
        caller._round_trip = direct


def beyond_round_trip(ctx: Context, policies: int) -> tuple[float, float, float]:
    """``(allow_request µs, its round trip µs, a bare call µs)``, medians over runs: the
    round trip as timed inside each request, and the same calls sent back to back."""
    from ratelimits.models import Policy
    from ratelimits.throttling import PolicyThrottle

    Policy.objects.all().delete()
    for i in range(policies):
        Policy.objects.create(
            name=f"{SCOPE}{i}",
            endpoint=SCOPE,
            algorithm="sliding_counter",
            limit=LIMIT,
            window=3600,
            key="ip",
        )
    calls = ctx.scaled(4000, 200)
    view, throttle = _View(), PolicyThrottle()
    for request in _requests(200):
        assert throttle.allow_request(request, view)  # warm: table, code, denial memory

    # A request is decided once per policy (a second look finds its decisions made), so
    # each run gets requests of its own.
    runs = [_requests(calls) for _ in range(ctx.runs)]
    requests = runs[0]
    matched = throttle.get_policies(requests[0], view)
    client = connection.get_client()
    pool = client.connection_pool  # type: ignore[union-attr]
    mode = caller.for_pool(pool).mode
    bare_calls = []
    for n in range(calls):
        call = decide_call([Check(p, f"ip:{_address(n % CLIENTS)}") for p in matched])
        bare_calls.append((commands.packed(mode, call),))
    held = pool.connection_class(**pool.connection_kwargs)
    held.connect()

    def bare(i: int) -> object:
        held.send_packed_command(bare_calls[i], check_health=False)
        return held.read_response()

    this_run = [requests]

    def throttled(i: int) -> object:
        return throttle.allow_request(this_run[0][i], view)

    ours, inside, floor = [], [], []
    for this_run[0] in runs:
        io = [0.0]
        with timing_io(io):
            ours.append(_timed(throttled, calls))
        inside.append(io[0] / calls * 1e6)
        floor.append(_timed(bare, calls))
    held.disconnect()
    Policy.objects.all().delete()
    return median(ours), median(inside), median(floor)


def redis_usec(ctx: Context, names: tuple[str, ...]) -> tuple[int, int]:
    """``(usec, calls)`` of the commands ``names`` so far, on the benchmark's server."""
    with ctx.client() as client:
        stats = client.info("commandstats")
    rows = [stats.get(f"cmdstat_{name}", {}) for name in names]
    return sum(int(r.get("usec", 0)) for r in rows), sum(int(r.get("calls", 0)) for r in rows)


def cpu_per_call(ctx: Context, names: tuple[str, ...], send: Callable[[int], object]) -> float:
    """Median over runs of the server's µs per call of ``names`` while ``send`` runs."""
    found = [_cpu_run(ctx, names, send, run) for run in range(ctx.runs)]
    return median(found)


def _cpu_run(
    ctx: Context, names: tuple[str, ...], send: Callable[[int], object], run: int
) -> float:
    """The server's µs per call of ``names`` over one run of ``send``."""
    calls = ctx.scaled(3000, 100)
    usec, count = redis_usec(ctx, names)
    for i in range(calls):
        send(run * calls + i)
    usec_after, count_after = redis_usec(ctx, names)
    return (usec_after - usec) / max(1, count_after - count)


#: The contenders of the Redis CPU figure: ``label -> (commands counted, send(i))``.
CpuContenders = dict[str, tuple[tuple[str, ...], Callable[[int], object]]]


def cpu_in_turns(ctx: Context, contenders: CpuContenders) -> dict[str, float]:
    """``{label: µs per call}``, medians over ``ctx.runs`` rounds in which every
    contender runs once, the order rotating: a drift of the machine (this VM's CPU
    speed moves by a third within minutes) falls on all alike, so their ratios hold."""
    found: dict[str, list[float]] = {label: [] for label in contenders}
    labels = list(contenders)
    for run in range(ctx.runs):
        shift = run % len(labels)
        for label in labels[shift:] + labels[:shift]:
            names, send = contenders[label]
            found[label].append(_cpu_run(ctx, names, send, run))
    return {label: median(runs) for label, runs in found.items()}


#: The label of the ``limits`` moving window, and of the call with no keys.
LIMITS_LABEL, NO_KEYS_LABEL = "limits moving window", "decide call with no keys"


def redis_cpu(ctx: Context) -> tuple[dict[str, float], float, float]:
    """``({algorithm: µs}, limits moving window µs, fixed cost µs)``, taken in turns."""
    from limits import RateLimitItemPerHour
    from limits.storage import RedisStorage
    from limits.strategies import MovingWindowRateLimiter

    contenders: CpuContenders = {}
    for algorithm in ALGORITHMS:
        policy = CompiledPolicy.build(
            name=f"cpu-{algorithm}", endpoint="x", algorithm=algorithm, limit=1000, window=3600
        )
        checks = [[Check(policy, f"ip:{_address(n)}")] for n in range(CLIENTS)]
        limiter.decide(checks[0])  # the code is loaded

        def decide(i: int, checks: list[list[Check]] = checks) -> object:
            return limiter.decide(checks[i % CLIENTS])

        contenders[algorithm] = (DECIDE_COMMANDS, decide)

    moving = MovingWindowRateLimiter(RedisStorage(ctx.url))
    item = RateLimitItemPerHour(1000)
    moving.hit(item, "warm")
    contenders[LIMITS_LABEL] = (("evalsha",), lambda i: moving.hit(item, f"client{i % CLIENTS}"))

    pool = connection.get_client().connection_pool  # type: ignore[union-attr]
    mode = caller.for_pool(pool).mode
    empty = (commands.packed(mode, decide_call([])),)
    held = pool.connection_class(**pool.connection_kwargs)
    held.connect()

    def no_keys(i: int) -> object:
        held.send_packed_command(empty, check_health=False)
        return held.read_response()

    contenders[NO_KEYS_LABEL] = (DECIDE_COMMANDS, no_keys)
    found = cpu_in_turns(ctx, contenders)
    held.disconnect()
    theirs, fixed = found.pop(LIMITS_LABEL), found.pop(NO_KEYS_LABEL)
    return found, theirs, fixed


def _raw_socket(pool: Any) -> socket.socket:
    """A plain socket to ``pool``'s server (TCP or a Unix socket), as redis-py sets it."""
    kwargs = pool.connection_kwargs
    if "path" in kwargs:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(kwargs["path"])
        return sock
    sock = socket.create_connection((kwargs.get("host", "localhost"), kwargs.get("port", 6379)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def round_trip_floor(ctx: Context) -> tuple[float, float]:
    """``(the limiter's call µs, the floor µs)``, medians over alternating rounds: one
    ``sliding_counter`` policy's decide call as the limiter makes it (from the checks to
    the parsed reply, breaker included), and the same bytes on a raw socket, the reply
    parsed by hiredis."""
    import hiredis

    policy = CompiledPolicy.build(
        name="floor", endpoint="x", algorithm="sliding_counter", limit=LIMIT, window=3600
    )
    checks = [[Check(policy, f"ip:{_address(n)}")] for n in range(CLIENTS)]
    limiter.decide(checks[0])  # the code is loaded, the thread's connection made
    pool = connection.get_client().connection_pool  # type: ignore[union-attr]
    mode = caller.for_pool(pool).mode
    wire = [commands.packed(mode, decide_call(found)) for found in checks]
    sock, buffer = _raw_socket(pool), bytearray(65536)

    def floor(i: int) -> object:
        sock.sendall(wire[i % CLIENTS])
        reader = hiredis.Reader()
        while True:
            reader.feed(buffer, 0, sock.recv_into(buffer))
            reply = reader.gets()
            if reply is not False:
                return reply

    def ours(i: int) -> object:
        return drive(plan(current(), checks[i % CLIENTS], record=True, now=None))

    assert floor(0)[0] == ours(0)[0] == 1  # the same call, admitted both ways
    calls = ctx.scaled(3000, 100)
    found: dict[str, list[float]] = {"ours": [], "floor": []}
    for run in range(max(ctx.runs, 2) * 2):
        pair = (("ours", ours), ("floor", floor))
        for name, function in pair if run % 2 else reversed(pair):
            found[name].append(_timed(function, calls))
    sock.close()
    return median(found["ours"]), median(found["floor"])


def traffic_ab(ctx: Context) -> dict[bool, tuple[float, float]]:
    """``{on: (Python beyond the round trip µs, Redis µs per decision)}`` with the traffic
    record on and off, one policy, the two settings in alternate rounds."""
    from django.conf import settings
    from django.test import override_settings

    policy = CompiledPolicy.build(
        name="cpu-traffic", endpoint="x", algorithm="sliding_counter", limit=1000, window=3600
    )
    checks = [[Check(policy, f"ip:{_address(n)}")] for n in range(CLIENTS)]
    rounds: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(2):
        for on in (True, False):
            ratelimits = {**getattr(settings, "RATELIMITS", {}), "TRAFFIC": on}
            with override_settings(RATELIMITS=ratelimits):
                ours, inside, _ = beyond_round_trip(ctx, 1)
                limiter.decide(checks[0])
                cpu = cpu_per_call(
                    ctx, DECIDE_COMMANDS, lambda i: limiter.decide(checks[i % CLIENTS])
                )
            rounds[on].append((ours - inside, cpu))
    return {
        on: (median([r[0] for r in found]), median([r[1] for r in found]))
        for on, found in rounds.items()
    }


def _bound_text(bound: float | None) -> str:
    return "" if bound is None else f"<= {bound}x"


def run(ctx: Context) -> Section:
    beyond_rows, targets = [], []
    for policies in (1, 3):
        ours, inside, floor = beyond_round_trip(ctx, policies)
        beyond = ours - inside
        label = f"{policies} sliding_counter {'policy' if policies == 1 else 'policies'}"
        beyond_rows.append([label, f"{ours:.1f}", f"{inside:.1f}", f"{beyond:.1f}", f"{floor:.1f}"])
        targets.append(
            Target(
                f"Python beyond the round trip, {policies} "
                + ("policy" if policies == 1 else "policies"),
                f"{beyond:.1f} µs (allow_request {ours:.1f} - its round trip {inside:.1f})",
                f"<= {BEYOND_BOUNDS_US[policies]:.0f} µs",
                beyond <= BEYOND_BOUNDS_US[policies],
            )
        )
    cpu, theirs, fixed = redis_cpu(ctx)
    cpu_rows = [
        [algorithm, f"{us:.2f}", f"{us / theirs:.2f}x", _bound_text(CPU_BOUNDS.get(algorithm))]
        for algorithm, us in cpu.items()
    ]
    cpu_rows.append([LIMITS_LABEL, f"{theirs:.2f}", "1.00x", ""])
    cpu_rows.append([NO_KEYS_LABEL, f"{fixed:.2f}", "", f"<= {FIXED_COST_BOUND_US} µs"])
    for algorithm, us in cpu.items():
        bound = CPU_BOUNDS.get(algorithm)
        if bound is None:  # measured beside the others, with no target of its own
            continue
        targets.append(
            Target(
                f"{algorithm}: Redis CPU per decision vs limits moving window",
                f"{us / theirs:.2f}x ({us:.2f} µs vs {theirs:.2f} µs)",
                f"<= {bound}x",
                us / theirs <= bound,
            )
        )
    targets.append(
        Target(
            "Redis CPU of a decide call with no keys (the fixed cost)",
            f"{fixed:.2f} µs",
            f"<= {FIXED_COST_BOUND_US} µs",
            fixed <= FIXED_COST_BOUND_US,
        )
    )
    ours_call, floor_call = round_trip_floor(ctx)
    floor_rows = [
        ["the limiter's decide call", f"{ours_call:.1f}", f"{ours_call / floor_call:.2f}x"],
        ["raw socket + hiredis (the floor)", f"{floor_call:.1f}", "1.00x"],
    ]
    targets.append(
        Target(
            "The limiter's decide call vs a raw socket + hiredis (the floor)",
            f"{ours_call / floor_call:.2f}x ({ours_call:.1f} µs vs {floor_call:.1f} µs)",
            f"<= {FLOOR_BOUND}x",
            ours_call / floor_call <= FLOOR_BOUND,
        )
    )
    traffic = traffic_ab(ctx)
    (python_on, cpu_on), (python_off, cpu_off) = traffic[True], traffic[False]
    traffic_rows = [
        ["on", f"{python_on:.1f}", f"{cpu_on:.2f}"],
        ["off", f"{python_off:.1f}", f"{cpu_off:.2f}"],
        ["on - off", f"{python_on - python_off:+.1f}", f"{cpu_on / cpu_off:.2f}x"],
    ]
    targets.append(
        Target(
            "The traffic record: Redis CPU per decision, on vs off",
            f"{cpu_on / cpu_off:.2f}x ({cpu_on:.2f} µs vs {cpu_off:.2f} µs)",
            f"<= {TRAFFIC_CPU_BOUND}x",
            cpu_on / cpu_off <= TRAFFIC_CPU_BOUND,
        )
    )
    targets.append(
        Target(
            "The traffic record: Python it adds to a request",
            f"{python_on - python_off:+.1f} µs ({python_on:.1f} vs {python_off:.1f})",
            f"<= {TRAFFIC_PYTHON_BOUND_US:.0f} µs",
            python_on - python_off <= TRAFFIC_PYTHON_BOUND_US,
        )
    )
    mode = caller.for_pool(connection.get_client().connection_pool).mode  # type: ignore[union-attr]
    ran_as = "Function (`FCALL`)" if mode == commands.FUNCTION else "script (`EVALSHA`)"
    body = "\n\n".join(
        [
            __doc__.split("\n\n", 1)[1].strip(),
            markdown_table(
                [
                    "policies",
                    "allow_request (µs)",
                    "its round trip (µs)",
                    "Python beyond it (µs)",
                    "bare calls back to back (µs)",
                ],
                beyond_rows,
            ),
            markdown_table(
                ["decision", "Redis µs per call", "vs limits moving window", "target"], cpu_rows
            ),
            markdown_table(["round trip", "µs per call", "vs the floor"], floor_rows),
            markdown_table(
                ["traffic record", "Python beyond the round trip (µs)", "Redis µs per decision"],
                traffic_rows,
            ),
            "\n".join(
                [
                    f"- The decide code ran as a Redis {ran_as} in this run.",
                    f"- Python beyond: median of {ctx.runs} runs of {ctx.scaled(4000, 200)} "
                    "requests each. The round trip is timed inside each request, around the "
                    "write of the call and the read of its reply; what is left is Python. "
                    "The bare calls send the very bytes of each request's call back to back "
                    "on a held connection: they are faster than the round trip "
                    "inside a request because a Redis that just answered is still awake; "
                    "after an idle gap, waking it on the other CPU costs more (on this VM a "
                    "`PING` takes about 30 µs back to back and about 75 µs after 200 µs "
                    "idle). So allow_request minus the bare call would count that wake-up "
                    "as Python.",
                    "- The round trip against its floor: 1 policy, "
                    f"{CLIENTS} clients in turn, every call admitted; median of "
                    f"{max(ctx.runs, 2) * 2} rounds of {ctx.scaled(3000, 100)} calls, the "
                    "two taking turns and alternating which goes first.",
                    f"- Redis CPU: {CLIENTS} clients at 1,000 per hour, each under its limit; "
                    f"median of {ctx.runs} rounds of {ctx.scaled(3000, 100)} calls, `usec` over "
                    "`calls` of the outer command; in each round every row runs once, in "
                    "an order that rotates from round to round, so that the machine's drift "
                    "falls on all of them alike.",
                ]
            ),
        ]
    )
    return Section("The hot path against its floor", body, targets)
