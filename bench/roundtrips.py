"""Redis round trips, Redis commands and database queries per request, per limiter.

Each limiter of :mod:`bench.overhead` (limit 1,000 per hour per client, so every request
is admitted) answers, after a warm-up, requests from new clients (each request from an
address not seen before) and then from one returning client. Counted over them:

- round trips: the writes made on Redis connections from the request's thread (redis-py's
  ``Connection.send_packed_command``: one per command, one per pipeline; the limiter's
  own write of its decide call on a plain connection), and the commands they carry, by
  name (``Redis.execute_command``);
- what Redis ran: ``INFO commandstats`` deltas, which also count the commands a Lua script
  runs inside the one call, and the server's microseconds (``usec``) per request;
- database queries: ``CaptureQueriesContext`` on the default connection.

PolicyThrottle's policy table also sends one ``GET`` of its version stamp at most every
``POLICY_REFRESH_INTERVAL`` (1 s) per process, and the metrics thread one pipeline every
``METRICS_FLUSH_INTERVAL`` (5 s): both are counted apart, over a timed stretch of requests.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.connection import AbstractConnection

from bench.common import (
    DECIDE_COMMANDS,
    Context,
    Section,
    Target,
    command_delta,
    command_stats,
    markdown_table,
)
from bench.overhead import (
    Clients,
    Contender,
    InProcess,
    algorithms,
    contenders,
    flush_counts,
    install,
    uninstall,
)
from ratelimits.engine.store import caller

LIMIT = 1000
#: Addresses from 10.128.0.0: none that :mod:`bench.overhead` used (a worker may remember
#: a denial across modules).
FIRST_CLIENT = 1 << 23


@dataclass
class Recorder:
    """Redis traffic seen in redis-py, split by thread: the request path and the rest."""

    thread: int = field(default_factory=threading.get_ident)
    trips: int = 0
    commands: Counter[str] = field(default_factory=Counter)
    background_trips: int = 0
    background_commands: Counter[str] = field(default_factory=Counter)

    def reset(self) -> None:
        self.trips = self.background_trips = 0
        self.commands.clear()
        self.background_commands.clear()


@contextmanager
def recording() -> Iterator[Recorder]:
    """Count redis-py's writes and commands while the block runs."""
    recorder = Recorder()
    send = AbstractConnection.send_packed_command
    command = AbstractConnection.send_command

    packing = threading.local()  # set while send_command packs: its name is counted there

    def counted_send(self: Any, command: Any, check_health: bool = True) -> Any:
        ours = threading.get_ident() == recorder.thread
        if ours:
            recorder.trips += 1
        else:
            recorder.background_trips += 1
        if not getattr(packing, "active", False):  # bytes packed ahead, as the limiter sends
            counts = recorder.commands if ours else recorder.background_commands
            counts[_packed_name(command)] += 1
        return send(self, command, check_health)

    # Commands packed by redis-py are counted where every single one goes, send_command.
    def counted_command(self: Any, *args: Any, **options: Any) -> Any:
        name = str(args[0]).upper() if args else "?"
        if threading.get_ident() == recorder.thread:
            recorder.commands[name] += 1
        else:
            recorder.background_commands[name] += 1
        packing.active = True
        try:
            return command(self, *args, **options)
        finally:
            packing.active = False

    # The limiter's calls on a plain connection bypass redis-py's send: counted there.
    direct = caller._round_trip

    def counted_direct(connection: Any, data: bytes) -> Any:
        ours = threading.get_ident() == recorder.thread
        if ours:
            recorder.trips += 1
            recorder.commands[_packed_name(data)] += 1
        else:
            recorder.background_trips += 1
            recorder.background_commands[_packed_name(data)] += 1
        return direct(connection, data)

    AbstractConnection.send_packed_command = counted_send  # type: ignore[method-assign]
    AbstractConnection.send_command = counted_command  # type: ignore[method-assign]
    caller._round_trip = counted_direct
    try:
        yield recorder
    finally:
        AbstractConnection.send_packed_command = send  # type: ignore[method-assign]
        AbstractConnection.send_command = command  # type: ignore[method-assign]
        caller._round_trip = direct


#: A request's one decide call, by the names commands are counted under here.
DECIDE = tuple(name.upper() for name in DECIDE_COMMANDS)


def _packed_name(command: Any) -> str:
    """The name of the first command in RESP bytes (``*N\\r\\n$L\\r\\nNAME\\r\\n...``)."""
    first = command if isinstance(command, bytes) else bytes(command[0])
    try:
        return first.split(b"\r\n", 3)[2].decode().upper()
    except (IndexError, UnicodeDecodeError):
        return "?"


@dataclass
class Traffic:
    """One contender's traffic over ``requests`` requests."""

    requests: int
    trips: int
    commands: Counter[str]
    server: dict[str, int]
    server_usec: int
    queries: int
    #: PolicyThrottle's version checks (``GET``), left out of ``trips`` and ``commands``.
    version_gets: int = 0

    def per_request(self, count: float) -> str:
        return f"{count / self.requests:.2f}".rstrip("0").rstrip(".")

    def names(self, counts: dict[str, int]) -> str:
        if not counts:
            return "none"
        return ", ".join(
            f"{name.upper()} {self.per_request(n)}"
            for name, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        )

    def sent(self) -> str:
        """The commands sent per request, and the version checks apart."""
        text = self.names(self.commands)
        if self.version_gets:
            text += f" (+ {self.version_gets} version GET in {self.requests} requests)"
        return text


def server_usec(client: redis.Redis) -> dict[str, int]:
    return {
        name.removeprefix("cmdstat_"): int(row["usec"])
        for name, row in client.info("commandstats").items()
    }


def measure(
    ctx: Context,
    recorder: Recorder,
    send: Callable[[list[str]], object],
    addresses: list[str],
    version_checks: bool = False,
) -> Traffic:
    """Send one request per address; what it cost in Redis and in the database.

    With ``version_checks`` (PolicyThrottle), the ``GET`` commands sent are the policy table's
    version checks: counted apart, not as the requests' round trips."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = ctx.client()
    before, usec_before = command_stats(client), server_usec(client)
    recorder.reset()
    with CaptureQueriesContext(connection) as queries:
        send(addresses)
    trips, commands = recorder.trips, Counter(recorder.commands)
    after, usec_after = command_stats(client), server_usec(client)
    server = command_delta(before, after)
    server.pop("info", None)
    # The commands sent: a script's own commands are in its time already.
    sent = {name.lower() for name in commands}
    usec = sum(usec_after.get(n, 0) - usec_before.get(n, 0) for n in server if n in sent)
    version_gets = commands.pop("GET", 0) if version_checks else 0
    if version_gets:
        trips -= version_gets
        server["get"] -= version_gets
        if not server["get"]:
            del server["get"]
    return Traffic(len(addresses), trips, commands, server, usec, len(queries), version_gets)


@dataclass
class Row:
    contender: Contender
    new: Traffic
    returning: Traffic


def measure_contender(
    ctx: Context, client: InProcess, recorder: Recorder, contender: Contender, requests: int
) -> Row:
    path = contender.url(LIMIT)

    def send(addresses: list[str]) -> None:
        client.send(client.environs(path, addresses))

    fresh = Clients(1, 1, start=FIRST_CLIENT)  # a new address for every request
    send(fresh.take(5))  # warm-up: connections, scripts, per-limit views, tables
    policy = contender.kind == "policy"
    new = measure(ctx, recorder, send, fresh.take(requests), policy)
    returning_client = Clients(1, LIMIT, start=FIRST_CLIENT + 1_000_000)
    send(returning_client.take(5))
    returning = measure(ctx, recorder, send, returning_client.take(requests), policy)
    return Row(contender, new, returning)


@dataclass
class Background:
    seconds: float
    requests: int
    version_gets: int
    flushes: int
    flush_commands: Counter[str]


def measure_background(
    ctx: Context, client: InProcess, recorder: Recorder, contender: Contender, seconds: float
) -> Background:
    """PolicyThrottle's amortised traffic: version checks on the request path (``GET``)
    and the metrics thread's pipelines, over ``seconds`` of requests."""
    path = contender.url(LIMIT)
    clients = Clients(1000, LIMIT, start=FIRST_CLIENT + 2_000_000)
    recorder.reset()
    sent = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        client.send(client.environs(path, clients.take(50)))
        sent += 50
    elapsed = time.monotonic() - started
    return Background(
        elapsed,
        sent,
        recorder.commands.get("GET", 0),
        recorder.background_trips,
        Counter(recorder.background_commands),
    )


def run(ctx: Context) -> Section:
    requests = ctx.scaled(200, 10)
    names = algorithms()
    lineup = contenders(names)
    install([LIMIT], names)
    client = InProcess()
    rows = []
    try:
        with recording() as recorder:
            for contender in lineup:
                flush_counts(ctx)
                rows.append(measure_contender(ctx, client, recorder, contender, requests))
            flush_counts(ctx)
            policy = next(c for c in lineup if c.kind == "policy")
            background = measure_background(ctx, client, recorder, policy, ctx.scaled(6.0, 0.5))
    finally:
        uninstall()
        flush_counts(ctx)
    return Section(
        "Redis round trips and database queries per request",
        describe(rows, background, requests),
        targets(rows),
    )


def describe(rows: Sequence[Row], background: Background, requests: int) -> str:
    trips_rows = []
    for row in rows:
        new, back = row.new, row.returning
        trips_rows.append(
            [
                row.contender.label,
                new.per_request(new.trips),
                back.per_request(back.trips),
                back.sent(),
                back.names(back.server),
                f"{back.server_usec / back.requests:.1f}",
                f"{new.per_request(new.queries)} / {back.per_request(back.queries)}",
            ]
        )
    table = markdown_table(
        [
            "limiter",
            "round trips, new client",
            "round trips, returning client",
            "commands sent (returning)",
            "commands Redis ran, incl. inside scripts (returning)",
            "Redis µs per request (returning)",
            "DB queries (new / returning)",
        ],
        trips_rows,
    )
    new_differs = [
        f"{row.contender.label}: {row.new.sent()}"
        for row in rows
        if set(row.new.commands) != set(row.returning.commands)
        or row.new.trips != row.returning.trips
    ]
    flush_names = ", ".join(f"{n} {c}" for n, c in sorted(background.flush_commands.items()))
    lines = [
        f"Per request, over {requests} requests per limiter after a warm-up: first each "
        "from a new client (an address not seen before), then from one returning client. "
        f"Every limiter counts by address at {LIMIT} per hour, so all were admitted.",
        "",
        table,
        "",
        "How it was counted: a round trip is one write by redis-py on a connection from "
        "the request's thread (`send_packed_command`: one per command, one per pipeline; "
        "no limiter here pipelines on the request path), each followed by reading the "
        "reply. Commands sent are `Redis.execute_command` calls by name; what Redis ran "
        "is the `INFO commandstats` delta, which counts each command a Lua script runs "
        "too; Redis µs is the `usec` delta of the commands sent (a script's time includes "
        "the commands it runs), time the server spent on the request. PolicyThrottle's "
        "version checks (`GET`, below) are shown apart, not counted as round trips.",
    ]
    if new_differs:
        lines += ["", "A new client costs differently (commands sent per request):", ""]
        lines += [f"- {text}" for text in new_differs]
    lines += [
        "",
        f"PolicyThrottle's amortised traffic, over {background.seconds:.1f} s of requests "
        f"({background.requests} requests, {background.requests / background.seconds:.0f} "
        f"per second): {background.version_gets} `GET` of the policy table's version stamp "
        "on the request path (at most one per `POLICY_REFRESH_INTERVAL`, 1 s), and "
        f"{background.flushes} round trips from the metrics thread"
        + (f" ({flush_names})" if flush_names else "")
        + " (one pipeline per `METRICS_FLUSH_INTERVAL`, 5 s, off the request path).",
    ]
    return "\n".join(lines)


def targets(rows: Sequence[Row]) -> list[Target]:
    found = []
    policy_rows = [row for row in rows if row.contender.kind == "policy"]
    for label, pick in (("new client", "new"), ("returning client", "returning")):
        traffic: list[Traffic] = [getattr(row, pick) for row in policy_rows]
        calls = [sum(t.commands.get(name, 0) for name in DECIDE) / t.requests for t in traffic]
        others = sum(t.trips - sum(t.commands.get(name, 0) for name in DECIDE) for t in traffic)
        gets = sum(t.version_gets for t in traffic)
        requests = sum(t.requests for t in traffic)
        measured = f"{min(calls):.2f} to {max(calls):.2f} decide calls per request; " + (
            f"{others} other round trips" if others else "no other round trip"
        )
        if gets:
            plural = "s" if gets != 1 else ""
            measured += f" (and {gets} version GET{plural} in {requests} requests, amortised)"
        found.append(
            Target(
                f"PolicyThrottle: decide calls per admitted request, 1 or 3 policies ({label})",
                measured,
                "exactly 1, no other round trip (version checks apart)",
                all(c == 1 for c in calls) and others == 0,
            )
        )
    queries = sum(row.new.queries + row.returning.queries for row in policy_rows)
    requests = sum(row.new.requests + row.returning.requests for row in policy_rows)
    found.append(
        Target(
            "PolicyThrottle: database queries per request",
            f"{queries} in {requests} requests",
            "0",
            queries == 0,
        )
    )
    return found
