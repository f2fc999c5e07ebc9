"""What the drills send: 8 threads of Django test clients through the full stack, each
request recorded as a :class:`Sample`; the timing bounds, and the checks on samples."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connections
from django.http import HttpResponse
from django.test import Client

from ratelimits.conf import app_settings
from tests.load import Load

THREADS = 8
#: Seconds: how long a request may take beyond the timeout before we call it slow. A 2-core
#: CI machine runs 8 client threads and redis-server on 2 cores under the GIL, so one
#: request can wait tens of milliseconds for the GIL alone; 50 ms keeps the check far
#: below what a request waiting for Redis to come back (the 500 ms pause, a restart)
#: would cost, which is what the drills are there to catch.
SLACK = 0.05
#: Seconds between one thread's requests in the latency drills. Eight threads sending
#: back to back keep the GIL always taken, and a request's time is then mostly its wait
#: for the GIL (over 100 ms at the slowest on 2 cores), which is not what is measured.
#: Paced, the 8 threads still send about 600 requests a second together.
PACE = 0.01
#: Seconds a drill waits for what it expects (requests answered, a table swapped in)
#: before it fails: far beyond what even a loaded machine takes.
WAIT = 30.0
#: Seconds of SOCKET_TIMEOUT in the drills that do not measure it: a decide call that
#: missed the 0.1 s default on a loaded machine would be answered by the fail mode, and
#: its admission (counted by Redis all the same) could not be seen.
PATIENT_TIMEOUT = 10.0
#: Requests of the baseline before an outage, and of each phase a drill looks at: enough
#: for a p99 and for each kind's fail mode (about half a second's worth, unloaded).
PHASE = 300
ITEMS = "/api/items/"
LOGIN = "/api/login/"


@dataclass(frozen=True, slots=True)
class Sample:
    """One request as a client thread saw it (times from ``time.monotonic()``)."""

    kind: str
    started: float
    ended: float
    status: int
    retry_after: str | None
    ratelimit: str | None
    error: str | None = None
    #: The client thread that sent it.
    thread: int = 0

    @property
    def duration(self) -> float:
        """Seconds the request took, as the client saw it."""
        return self.ended - self.started

    def remaining(self) -> int:
        """The ``r`` of the response's ``RateLimit`` header (its first policy)."""
        assert self.ratelimit is not None
        return int(self.ratelimit.split(";r=")[1].split(";")[0])

    @property
    def decided_by_redis(self) -> bool:
        """Decisions made without Redis (fail mode) carry no ``RateLimit`` header."""
        return self.ratelimit is not None


Send = Callable[[Client, int, int], tuple[str, HttpResponse]]


def get_items(client: Client, thread: int, n: int) -> tuple[str, HttpResponse]:
    """Every request to the items endpoint."""
    return "items", client.get(ITEMS)


def items_and_login(client: Client, thread: int, n: int) -> tuple[str, HttpResponse]:
    """Half the requests to the fail-open items, half to the fail-closed login."""
    if (thread + n) % 2:
        return "login", client.post(LOGIN)
    return "items", client.get(ITEMS)


class ClientLoad(Load[Sample]):
    """``THREADS`` threads, each with its own :class:`Client`, calling ``send`` until
    :meth:`stop`, ``max_requests`` each, or ``max_seconds`` have passed (a bound for a
    drill that fails, beyond every :data:`WAIT`)."""

    def __init__(
        self,
        send: Send,
        *,
        max_requests: int = 5000,
        max_seconds: float = 3 * WAIT,
        warm: bool = False,
        pace: float = 0.0,
        gate: Callable[[int, int], None] | None = None,
    ) -> None:
        super().__init__(THREADS)
        self.send = send
        self.max_requests = max_requests
        self.max_seconds = max_seconds
        #: Send one unrecorded request of each kind first (the client's middleware chain,
        #: the policy table and the script are then loaded), for latency baselines.
        self.warm = warm
        #: Seconds each thread waits between its requests (see PACE).
        self.pace = pace
        #: Called as ``gate(thread, n)`` before request ``n`` of ``thread`` is timed and
        #: sent: a drill that makes the load wait for something (an error ends the thread).
        self.gate = gate
        self._clients = [Client() for _ in range(THREADS)]

    def prepare(self, thread: int) -> None:
        if self.warm:
            self.send(self._clients[thread], thread, 0)
            self.send(self._clients[thread], thread, 1)

    def run(self, thread: int) -> None:
        client = self._clients[thread]
        deadline = time.monotonic() + self.max_seconds
        for n in range(self.max_requests):
            if self.stopping or time.monotonic() > deadline:
                break
            if self.gate is not None:
                try:
                    self.gate(thread, n)
                except Exception as e:
                    now = time.monotonic()
                    self.record(Sample("gate", now, now, 0, None, None, repr(e), thread))
                    break
            started = time.monotonic()
            try:
                kind, response = self.send(client, thread, n)
            except Exception as e:  # an exception in the stack is what a 500 would be
                ended = time.monotonic()
                sample = Sample("?", started, ended, 0, None, None, repr(e), thread)
            else:
                sample = Sample(
                    kind,
                    started,
                    time.monotonic(),
                    response.status_code,
                    response.get("Retry-After"),
                    response.get("RateLimit"),
                    thread=thread,
                )
            self.record(sample)
            if self.pace:
                time.sleep(self.pace)

    def finish(self, thread: int) -> None:
        connections.close_all()

    def join(self, timeout: float = 3 * WAIT) -> None:
        """Wait for the threads to finish their ``max_requests`` (or their deadline)."""
        super().join(timeout)

    def wait_for(self, found: Callable[[Sample], bool], timeout: float) -> float | None:
        """Poll until a sample satisfies ``found``; the monotonic time it ended, else None."""
        sample = self.first(found, timeout)
        return None if sample is None else sample.ended

    def wait_count(
        self, found: Callable[[Sample], bool], count: int, timeout: float = WAIT
    ) -> bool:
        """Poll until ``count`` samples satisfy ``found``; False if they did not within
        ``timeout`` seconds."""
        return super().wait_count(found, count, timeout)

    def wait_every_thread(self, found: Callable[[Sample], bool], timeout: float = WAIT) -> bool:
        """Poll until every thread has a sample satisfying ``found``; False if they did
        not within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while {s.thread for s in self.snapshot() if found(s)} != set(range(THREADS)):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True


def assert_never_an_error(samples: list[Sample]) -> None:
    """No exception reached a client and no response was a 5xx."""
    errors = [s for s in samples if s.error or s.status >= 500]
    assert not errors, errors[:5]


def p99(values: list[float]) -> float:
    """The 99th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def ms(seconds: float) -> str:
    """``seconds`` in milliseconds, for messages."""
    return f"{seconds * 1000:.1f} ms"


def between(samples: list[Sample], start: float, end: float) -> list[Sample]:
    """Samples of requests that started at or after ``start`` and ended by ``end``."""
    return [s for s in samples if s.started >= start and s.ended <= end]


def limited_again(since: float) -> Callable[[Sample], bool]:
    """A Redis-decided 429 of items (its limit exhausted again) for a request after ``since``."""
    return lambda s: (
        s.kind == "items" and s.status == 429 and s.decided_by_redis and s.started >= since
    )


def assert_fail_modes(down: list[Sample]) -> None:
    """While Redis cannot answer: items (fail open) 200, login (fail closed) 429 with the
    configured Retry-After; none of them carries numbers that only Redis knows."""
    items = [s for s in down if s.kind == "items"]
    logins = [s for s in down if s.kind == "login"]
    assert len(items) >= 10 and len(logins) >= 10, (len(items), len(logins))
    assert {s.status for s in items} == {200}
    assert {s.status for s in logins} == {429}
    assert {s.retry_after for s in logins} == {str(app_settings.FAIL_CLOSED_RETRY_AFTER)}
    assert not any(s.decided_by_redis for s in down)
