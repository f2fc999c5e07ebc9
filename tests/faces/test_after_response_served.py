"""What a request holds is given back after its response, under real servers.

The demo site with test-only views (``tests/faces/served_site.py``) under gunicorn with
threads (2 workers of 8 threads) and under uvicorn (2 workers). The views count
themselves in Redis, so the number of requests in progress at once is seen by the views,
not taken from the limiter. Every loop is bounded in count and time.

A slot is given back when Django closes the response, just after the server wrote its
last byte: a client that sends its next request on a new connection the instant it has
an answer can still find its slot taken, for a fraction of a millisecond. So before a
next wave the tests wait (boundedly) until the limiter holds nothing, and every
exactness assertion stays exact.

A request that must stay in progress while the test looks (admitted ones of a wave, a
holder, a stream's next chunk) waits in the view for a gate the test opens (``hold=``,
see ``tests/faces/served_site.py``), never for a number of seconds: a wave's admitted
requests leave the view only once every other request of the wave was answered, however
slowly the machine delivers them.
"""

from __future__ import annotations

import http.client
import itertools
import os
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import redis
from django.contrib.auth.models import User

from project.api.demo_policies import DEMO_POLICIES
from ratelimits.conf import app_settings
from ratelimits.engine.limiter import Check, peek
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.store import connection
from ratelimits.models import Policy
from ratelimits.testutils import RedisServer, free_port
from ratelimits.tools import inventory
from tests.faces.served_site import gate_key, track_keys
from tests.helpers import redis_now_us, wait_until
from tests.served import (
    Site,
    announce_new_version,
    gunicorn_command,
    serve,
    site_env,
    uvicorn_command,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WORKERS = 2
THREADS = 8
CLIENTS = 16
#: Every client is 127.0.0.1 to the servers.
IDENTITY = "ip:127.0.0.1"
SETTINGS = "tests.faces.served_settings"
#: Seconds a test waits for what it expects (a view entered, a slot back, the workers'
#: tables) before it fails: far beyond what even a loaded machine takes (a slot comes
#: back well under a millisecond after its response), and short of the minute a lease
#: would take.
WAIT = 30.0
REQUEST_TIMEOUT = 15.0
SERVERS = ["gunicorn", "uvicorn"]


# --- the servers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    """A running site and its paths: the views that fit its server."""

    kind: str
    site: Site

    @property
    def port(self) -> int:
        return self.site.port

    @property
    def slow(self) -> str:
        """The slow view: a thread's under gunicorn, a coroutine on the loop under uvicorn."""
        return "slow" if self.kind == "gunicorn" else "aslow"

    @property
    def stream(self) -> str:
        return "stream" if self.kind == "gunicorn" else "astream"


def command(kind: str, port: int) -> list[str]:
    if kind == "gunicorn":
        return gunicorn_command(
            port, WORKERS, "--worker-class", "gthread", "--threads", str(THREADS)
        )
    return uvicorn_command(port, WORKERS)


@contextmanager
def running(kind: str, where: Path, **env: str) -> Iterator[Served]:
    port = free_port()
    environment = site_env(DJANGO_SETTINGS_MODULE=SETTINGS, **env)
    with serve(command(kind, port), port, where / f"{kind}.log", environment, kind) as site:
        yield Served(kind, site)


@pytest.fixture(scope="module")
def gunicorn_site(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with running("gunicorn", tmp_path_factory.mktemp("gunicorn")) as served:
        yield served


@pytest.fixture(scope="module")
def uvicorn_site(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with running("uvicorn", tmp_path_factory.mktemp("uvicorn")) as served:
        yield served


@pytest.fixture(params=SERVERS)
def served(request: pytest.FixtureRequest) -> Served:
    return request.getfixturevalue(f"{request.param}_site")  # type: ignore[no-any-return]


# --- HTTP -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes

    @property
    def pid(self) -> str | None:
        """The worker process that answered."""
        return self.headers.get("x-served-by")

    @property
    def policies(self) -> set[str]:
        """The policies its ``RateLimit-Policy`` names."""
        field = self.headers.get("ratelimit-policy", "")
        return {item.split(";")[0].strip().strip('"') for item in field.split(",") if item}


def send(
    port: int, path: str, *, method: str = "GET", form: dict[str, str] | None = None
) -> Answer:
    """One request on a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    try:
        if form is None:
            conn.request(method, path)
        else:
            content = {"Content-Type": "application/x-www-form-urlencoded"}
            conn.request(method, path, body=urlencode(form), headers=content)
        response = conn.getresponse()
        headers = {name.lower(): value for name, value in response.getheaders()}
        return Answer(response.status, headers, response.read())
    finally:
        conn.close()


class Background:
    """One request sent from a thread of its own; :meth:`result` waits (boundedly)."""

    def __init__(self, port: int, path: str) -> None:
        self.answer: Answer | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(port, path), daemon=True)
        self.thread.start()

    def _run(self, port: int, path: str) -> None:
        try:
            self.answer = send(port, path)
        except BaseException as e:
            self.error = e

    def result(self, timeout: float = REQUEST_TIMEOUT + 5) -> Answer:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the request did not finish"
        assert self.error is None, repr(self.error)
        assert self.answer is not None
        return self.answer


class Burst:
    """``clients`` requests from as many threads, each on its own connection, released
    together; :meth:`answered` counts the answers so far, :meth:`result` waits
    (boundedly) for all of them."""

    def __init__(
        self,
        port: int,
        path: str,
        clients: int = CLIENTS,
        *,
        method: str = "GET",
        form: dict[str, str] | None = None,
    ) -> None:
        self.clients = clients
        self.answers: list[Answer] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        barrier = threading.Barrier(clients)

        def client() -> None:
            try:
                barrier.wait(timeout=REQUEST_TIMEOUT)
                answer = send(port, path, method=method, form=form)
                with self._lock:
                    self.answers.append(answer)
            except BaseException as e:
                with self._lock:
                    self.errors.append(e)

        self._threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
        for thread in self._threads:
            thread.start()

    def answered(self) -> int:
        with self._lock:
            return len(self.answers) + len(self.errors)

    def result(self) -> list[Answer]:
        deadline = time.monotonic() + REQUEST_TIMEOUT + 5
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        assert not any(thread.is_alive() for thread in self._threads), "the burst did not finish"
        assert not self.errors, f"client errors: {self.errors[:3]!r}"
        assert len(self.answers) == self.clients
        return self.answers


def burst(
    port: int,
    path: str,
    clients: int = CLIENTS,
    *,
    method: str = "GET",
    form: dict[str, str] | None = None,
) -> list[Answer]:
    """``clients`` requests from as many threads, each on its own connection, released
    together."""
    return Burst(port, path, clients, method=method, form=form).result()


def open_gate(client: redis.Redis, gate: str) -> None:
    """Let the requests held at ``gate`` go on (``hold=GATE``)."""
    client.set(gate_key(gate), 1)


def held_wave(
    port: int, path: str, gate: str, in_progress: Callable[[], int], client: redis.Redis
) -> list[Answer]:
    """A burst at ``path`` (held at ``gate``): the admitted requests stay in progress
    until every other request of the burst was answered, then the gate opens."""
    wave = Burst(port, path)
    try:
        wait_until(
            lambda: wave.answered() + in_progress() == CLIENTS,
            WAIT,
            "every request of the wave answered or in progress",
        )
    finally:
        open_gate(client, gate)
    return wave.result()


def statuses(answers: Sequence[Answer]) -> dict[int, int]:
    return dict(Counter(answer.status for answer in answers))


# --- policies and Redis ---------------------------------------------------------------------

_numbers = itertools.count(1)


def name_for(what: str) -> str:
    """A policy name never used before in this run: a worker still holding an older
    table cannot answer with a header that looks like the new one."""
    return f"{what}-{next(_numbers)}"


def install(
    served: Served,
    redis_client: redis.Redis,
    policies: Sequence[dict[str, Any]],
    path: str,
    *,
    method: str = "GET",
    form: dict[str, str] | None = None,
    forget_denials: bool = False,
) -> list[str]:
    """Create ``policies``, wait until every worker decides ``method path`` with exactly
    them (the probes spend: the counters are reset after), and return their names."""
    names = [fields["name"] for fields in policies]
    for fields in policies:
        Policy.objects.create(**fields)
    announce_new_version(redis_client)
    time.sleep(float(app_settings.POLICY_REFRESH_INTERVAL) + 0.2)
    ready: set[str | None] = set()
    deadline = time.monotonic() + WAIT
    while True:
        answers = burst(served.port, path, 8, method=method, form=form)
        ready |= {a.pid for a in answers if a.policies == set(names)}
        if len(ready - {None}) >= WORKERS:
            break
        assert time.monotonic() < deadline, (
            f"{WORKERS} workers never showed {names} ({ready}):\n{served.site.output()}"
        )
        time.sleep(0.1)
    for name in names:
        inventory.reset(redis_client, name)
    if forget_denials:  # the workers forget remembered denials once they see the reset
        time.sleep(float(app_settings.POLICY_REFRESH_INTERVAL) + 0.2)
    return names


def held(name: str) -> int:
    """Units of ``name`` that 127.0.0.1 holds now (slots in progress, or requests counted
    in the window), read without taking one."""
    policy = CompiledPolicy.from_model(Policy.objects.get(name=name))
    _, verdict = peek([Check(policy, IDENTITY)], connection.get_client())
    return int(verdict.decisions[0].count)


def wait_free(name: str) -> float:
    """Wait until 127.0.0.1 holds nothing under ``name``: the slots came back."""
    return wait_until(lambda: held(name) == 0, WAIT, f"{name}'s slots back")


def in_view(client: redis.Redis, tag: str) -> tuple[int, int, set[str]]:
    """As the views saw ``tag``: in the view now, the most at once, the processes."""
    now, most, pids = track_keys(tag)
    return (
        int(client.get(now) or 0),
        int(client.get(most) or 0),
        {pid.decode() for pid in client.smembers(pids)},
    )


def concurrency(name: str, endpoint: str, limit: int, window: int = 60, **fields: Any) -> dict:
    return {
        "name": name,
        "endpoint": endpoint,
        "algorithm": "concurrency",
        "limit": limit,
        "window": window,
        "key": "ip",
        **fields,
    }


# --- concurrency ----------------------------------------------------------------------------


def test_at_most_the_limit_is_in_progress_across_processes(
    served: Served, redis_client: redis.Redis
) -> None:
    """16 clients at once at a limit of 3 in progress, twice: the views never see more
    than 3 at once (in 2 processes), exactly 3 are admitted, the others get a 429 with
    Retry-After: 1; the slots come back and the next wave is admitted the same."""
    limit = 3
    path = f"/served/{served.slow}/"
    (name,) = install(
        served,
        redis_client,
        [concurrency(name_for("slots"), f"served:{served.slow}", limit)],
        f"{path}?s=0&tag=probe",
    )
    answered_by: set[str | None] = set()
    for wave in range(2):
        tag = f"{name}-wave{wave}"
        answers = held_wave(
            served.port,
            f"{path}?hold={tag}&tag={tag}",
            tag,
            lambda: in_view(redis_client, tag)[0],  # noqa: B023
            redis_client,
        )
        now, most, pids = in_view(redis_client, tag)
        print(f"\n{served.kind} wave {wave}: {statuses(answers)}, {most} at once in {pids}", end="")
        assert statuses(answers) == {200: limit, 429: CLIENTS - limit}
        assert (now, most) == (0, limit)
        assert {a.headers["retry-after"] for a in answers if a.status == 429} == {"1"}
        assert {a.headers["ratelimit-policy"] for a in answers} == {f'"{name}";q={limit};w=60'}
        answered_by |= {a.pid for a in answers}
        wait_free(name)
    # Both processes answered: the limit holds across them.
    assert len(answered_by) == WORKERS, answered_by


def test_the_demo_report_takes_two_at_once(served: Served, redis_client: redis.Redis) -> None:
    """The demo's GET /api/report/ (DRF, about 300 ms) under its own policy, report:
    16 clients at once get exactly 2 reports, twice. (The served site's report waits for
    the wave's other answers before it builds.)"""
    fields = next(p for p in DEMO_POLICIES if p["name"] == "report")
    install(served, redis_client, [fields], "/api/report/")
    for wave in range(2):
        gate = f"report-{served.kind}-{wave}"
        answers = held_wave(
            served.port, f"/api/report/?hold={gate}", gate, lambda: held("report"), redis_client
        )
        assert statuses(answers) == {200: 2, 429: CLIENTS - 2}
        assert {a.headers["ratelimit-policy"] for a in answers} == {'"report";q=2;w=60'}
        wait_free("report")


@pytest.mark.parametrize("view", ["raises", "api-raises"])
def test_a_view_that_raises_gives_its_slot_back(
    served: Served, redis_client: redis.Redis, view: str
) -> None:
    """A view that raises (Django answers 500) holds its slot while it runs and gives it
    back after the 500: a plain view under the middleware, a DRF view under its throttle."""
    path = f"/served/{view}/"
    (name,) = install(
        served, redis_client, [concurrency(name_for("raises"), f"served:{view}", 1)], f"{path}?s=0"
    )
    for attempt in range(3):
        tag = f"{name}-{attempt}"
        running = Background(served.port, f"{path}?hold={tag}&tag={tag}")
        try:
            wait_until(lambda: in_view(redis_client, tag)[0] == 1, WAIT, "the view entered")  # noqa: B023
            assert send(served.port, f"{path}?s=0").status == 429  # its slot is taken
        finally:
            open_gate(redis_client, tag)
        assert running.result().status == 500
        took = wait_free(name)
        print(f"\n{served.kind} {view}: the slot came back {took * 1000:.1f} ms after", end="")


@pytest.mark.parametrize("view", ["slow", "aslow"])
def test_a_client_that_disconnects_gives_the_slot_back_once_the_view_ends(
    served: Served, redis_client: redis.Redis, view: str
) -> None:
    """The client closes its connection while the view runs. A sync view runs on (a
    thread cannot be cancelled, under either server), as does any view under WSGI, and
    keeps its slot until it ends; an async view under uvicorn is cancelled, and its slot
    comes back at once."""
    runs_on = view == "slow" or served.kind == "gunicorn"
    path = f"/served/{view}/"
    (name,) = install(
        served, redis_client, [concurrency(name_for("gone"), f"served:{view}", 1)], f"{path}?s=0"
    )
    for attempt in range(2):
        tag = f"{name}-{attempt}"
        sock = socket.create_connection(("127.0.0.1", served.port), timeout=REQUEST_TIMEOUT)
        request = f"GET {path}?hold={tag}&tag={tag} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        sock.sendall(request.encode())
        try:
            wait_until(lambda: in_view(redis_client, tag)[0] == 1, WAIT, "the view entered")  # noqa: B023
            sock.close()  # the client goes away
            if runs_on:
                # The server has seen the disconnect (under uvicorn; gunicorn notices only
                # when it writes); the view, held at its gate, runs on.
                time.sleep(0.3)
                assert in_view(redis_client, tag)[0] == 1
                assert held(name) == 1  # still held while the view runs
                assert send(served.port, f"{path}?s=0").status == 429
        finally:
            open_gate(redis_client, tag)
        if runs_on:
            wait_until(lambda: in_view(redis_client, tag)[0] == 0, WAIT, "the view ended")  # noqa: B023
        took = wait_free(name)
        print(f"\n{served.kind} {view}: slot back {took * 1000:.1f} ms after", end="")
        assert send(served.port, f"{path}?s=0").status == 200
        wait_free(name)  # (its slot comes back just after its answer)


def test_a_streaming_response_holds_its_slot_until_its_last_chunk(
    served: Served, redis_client: redis.Redis
) -> None:
    """While a streaming response is being sent its slot is held (another request is
    denied); once its last chunk is sent, the slot is free."""
    chunks = 4
    path = f"/served/{served.stream}/"
    (name,) = install(
        served,
        redis_client,
        [concurrency(name_for("stream"), f"served:{served.stream}", 1)],
        f"{path}?n=1",
    )
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=REQUEST_TIMEOUT)
    try:
        # Chunk n (after the first) is sent once gate name:n opens.
        conn.request("GET", f"{path}?n={chunks}&hold={name}")
        response = conn.getresponse()
        assert response.status == 200
        for n in range(chunks):
            assert response.readline() == f"chunk {n}\n".encode()
            if n < chunks - 1:  # more to come: the response is still being sent
                assert held(name) == 1
                denied = send(served.port, f"{path}?n=1")
                assert denied.status == 429, denied
                open_gate(redis_client, f"{name}:{n + 1}")
        assert response.read() == b""
    finally:
        for n in range(1, chunks):  # (a failed test leaves no chunk waiting)
            open_gate(redis_client, f"{name}:{n}")
        conn.close()
    wait_free(name)
    again = send(served.port, f"{path}?n=2&gap=0")
    assert (again.status, again.body) == (200, b"chunk 0\nchunk 1\n")


def test_a_killed_workers_slot_frees_itself_after_the_lease(
    gunicorn_site: Served, redis_client: redis.Redis
) -> None:
    """A gunicorn worker killed (SIGKILL) while its request sleeps in the view never
    gives the slot back: it stays taken until the lease (3 s) ends, then frees itself.
    When the lease ends is read from Redis (the lease's end is its score, in Redis time),
    not measured on the test's clock."""
    served, lease = gunicorn_site, 3
    (name,) = install(
        served,
        redis_client,
        [concurrency(name_for("lease"), "served:slow", 1, window=lease)],
        "/served/slow/?s=0&tag=probe",
    )
    key = CompiledPolicy.from_model(Policy.objects.get(name=name)).key_for(IDENTITY)
    doomed = Background(served.port, "/served/slow/?s=30&tag=doomed")
    wait_until(lambda: in_view(redis_client, "doomed")[0] == 1, WAIT, "the view entered")
    (pid,) = in_view(redis_client, "doomed")[2]
    os.kill(int(pid), signal.SIGKILL)
    doomed.thread.join(REQUEST_TIMEOUT)
    assert doomed.error is not None  # the connection died with the worker
    # One lease, "<start_us>-<n>", ending a lease after its start (beside the running
    # total "#", scored minus the units held).
    ((member, ends),) = redis_client.zrangebyscore(key, "(0", "+inf", withscores=True)
    assert ends == int(member.split(b"-")[0]) + lease * 1_000_000
    assert held(name) == 1
    assert send(served.port, "/served/slow/?s=0").status == 429
    assert redis_now_us(redis_client) < ends  # (denied by the lease, not later)
    wait_until(lambda: held(name) == 0, WAIT, "the lease ended")
    late = redis_now_us(redis_client) - ends
    print(f"\nthe killed worker's slot was seen free {late / 1000:.0f} ms after its lease", end="")
    assert late >= 0  # not before
    assert send(served.port, "/served/slow/?s=0").status == 200


# --- counts ---------------------------------------------------------------------------------

SIGN_IN = {"username": "reader", "password": "served-password-1"}
WRONG = {**SIGN_IN, "password": "wrong"}


def test_failed_sign_ins_only_are_counted(served: Served, redis_client: redis.Redis) -> None:
    """The demo's POST /api/login/ (DRF) under a policy counting failures, 3 per 3 s:
    sign-ins never spend; 16 failed sign-ins at once get exactly three 400s and thirteen
    429s; then a correct password is denied too, until a unit frees."""
    window, limit = 3, 3
    User.objects.create_user(SIGN_IN["username"], password=SIGN_IN["password"])
    (name,) = install(
        served,
        redis_client,
        [
            {
                "name": name_for("login"),
                "endpoint": "api:login",
                "methods": "POST",
                "algorithm": "sliding_log",
                "limit": limit,
                "window": window,
                "key": "ip",
                "counts": "failures",
                "fail_open": False,
            }
        ],
        "/api/login/",
        method="POST",
        form=WRONG,
    )
    signed_in = [send(served.port, "/api/login/", method="POST", form=SIGN_IN) for _ in range(10)]
    assert [a.status for a in signed_in] == [200] * 10
    wait_free(name)  # nothing spent

    started = time.monotonic()
    failed = burst(served.port, "/api/login/", method="POST", form=WRONG)
    assert statuses(failed) == {400: limit, 429: CLIENTS - limit}
    assert held(name) == limit
    denied = send(served.port, "/api/login/", method="POST", form=SIGN_IN)
    assert denied.status == 429
    assert held(name) == limit  # (denied while the failures were in the window)

    def signs_in() -> bool:
        return send(served.port, "/api/login/", method="POST", form=SIGN_IN).status == 200

    wait_until(signs_in, WAIT, "a sign-in after the failures left the window", 0.1)
    # Not before: the failures were counted after ``started``.
    assert time.monotonic() - started >= window - 0.25
    more = [send(served.port, "/api/login/", method="POST", form=SIGN_IN) for _ in range(5)]
    assert [a.status for a in more] == [200] * 5


def test_successes_only_are_counted(served: Served, redis_client: redis.Redis) -> None:
    """A view that answers both (decorated, scope served-status) under a policy counting
    successes, 3 per 60 s: failures never spend; 16 successes at once get exactly three
    200s; then a failure is denied too."""
    limit = 3
    (name,) = install(
        served,
        redis_client,
        [
            {
                "name": name_for("successes"),
                "endpoint": "served-status",
                "algorithm": "sliding_log",
                "limit": limit,
                "window": 60,
                "key": "ip",
                "counts": "successes",
            }
        ],
        "/served/status/?code=404",
    )
    failures = [send(served.port, f"/served/status/?code={code}") for code in [404, 503] * 5]
    assert [a.status for a in failures] == [404, 503] * 5
    wait_free(name)  # nothing spent

    answers = burst(served.port, "/served/status/?code=200")
    assert statuses(answers) == {200: limit, 429: CLIENTS - limit}
    assert held(name) == limit
    assert send(served.port, "/served/status/?code=404").status == 429
    assert held(name) == limit


# --- all or nothing -------------------------------------------------------------------------


@contextmanager
def writes_to(redis_client: redis.Redis, key: str) -> Iterator[list[str]]:
    """The events Redis reports on ``key`` during the block (keyspace notifications)."""
    events: list[str] = []
    redis_client.config_set("notify-keyspace-events", "KA")
    pubsub = redis_client.pubsub()
    try:
        pubsub.subscribe(f"__keyspace@0__:{key}")
        assert pubsub.get_message(timeout=1.0)["type"] == "subscribe"
        yield events
        deadline = time.monotonic() + 0.3  # whatever is still on its way
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=0.05)
            if message is not None and message["type"] == "message":
                events.append(message["data"].decode())
    finally:
        pubsub.close()
        redis_client.config_set("notify-keyspace-events", "")


def test_a_request_another_policy_denies_spends_nothing(
    served: Served, redis_client: redis.Redis
) -> None:
    """A concurrency policy (1 in progress) and a rate policy (4 per 60 s) on one view,
    decided all or nothing: requests the concurrency policy denies spend nothing in the
    rate policy, and requests the rate policy denies take no slot."""
    path = f"/served/{served.slow}/"
    slots, rate = name_for("one-at-a-time"), name_for("four-a-minute")
    install(
        served,
        redis_client,
        [
            concurrency(slots, f"served:{served.slow}", 1),
            {
                "name": rate,
                "endpoint": f"served:{served.slow}",
                "algorithm": "sliding_log",
                "limit": 4,
                "window": 60,
                "key": "ip",
            },
        ],
        f"{path}?s=0&tag=probe",
        forget_denials=True,
    )
    policies = {p.name: CompiledPolicy.from_model(p) for p in Policy.objects.all()}
    slots_key, rate_key = policies[slots].key_for(IDENTITY), policies[rate].key_for(IDENTITY)

    # The concurrency policy denies: the rate policy is not written.
    running = Background(served.port, f"{path}?hold={slots}&tag=holder")
    try:
        wait_until(lambda: in_view(redis_client, "holder")[0] == 1, WAIT, "the view entered")
        with writes_to(redis_client, rate_key) as events:
            denied = burst(served.port, f"{path}?s=0&tag=denied", CLIENTS - 1)
    finally:
        open_gate(redis_client, slots)
    assert statuses(denied) == {429: CLIENTS - 1}
    assert events == []
    assert held(rate) == 1
    assert running.result().status == 200
    wait_free(slots)

    # The rate policy denies: no slot is taken.
    with writes_to(redis_client, slots_key) as admitted_events:
        for _ in range(3):
            assert send(served.port, f"{path}?s=0").status == 200
            wait_free(slots)
    assert held(rate) == 4
    assert "zadd" in admitted_events  # (an admitted request's slot is seen)
    with writes_to(redis_client, slots_key) as events:
        denied = burst(served.port, f"{path}?s=0&tag=denied")
    assert statuses(denied) == {429: CLIENTS}
    assert events == []
    assert (held(slots), held(rate)) == (0, 4)


# --- Redis down -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", SERVERS)
def test_redis_down_gives_each_fail_mode_and_no_give_back_error_reaches_a_client(
    kind: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A site on a Redis of its own, two concurrency policies on one view: ``open``
    fails open, ``closed`` fails closed. Redis is killed while a request of each is in
    the view: both answer 200 in full (their give-back fails after the response, and is
    only logged). While Redis is down, open answers 200 and closed 429 with
    Retry-After: 1, none a 500; once it is back, Redis decides again."""
    with RedisServer() as own:
        slow = "slow" if kind == "gunicorn" else "aslow"
        opened, closed = name_for("open"), name_for("closed")
        Policy.objects.create(**concurrency(opened, f"served:{slow}", 2, fail_open=True))
        Policy.objects.create(**concurrency(closed, f"served:{slow}-closed", 2, fail_open=False))
        tracked = os.environ["REDIS_URL"]  # the tests' Redis, which stays up
        with running(kind, tmp_path, REDIS_URL=own.url, SERVED_TRACK_URL=tracked) as served:
            for path, name in ((slow, opened), (f"{slow}-closed", closed)):
                probe = send(served.port, f"/served/{path}/?s=0&tag=probe")
                assert (probe.status, probe.policies) == (200, {name}), served.site.output()

            holders = [
                Background(served.port, f"/served/{slow}/?hold={opened}&tag=held"),
                Background(served.port, f"/served/{slow}-closed/?hold={opened}&tag=held"),
            ]
            try:
                wait_until(lambda: in_view(redis_client, "held")[0] == 2, WAIT, "the views entered")
                own.kill()  # while both are in their views
            finally:
                open_gate(redis_client, opened)
            for holder in holders:
                answer = holder.result()
                assert answer.status == 200
                assert answer.body.startswith(b'{"pid": ')

            while_down = [
                (
                    send(served.port, f"/served/{slow}/?s=0"),
                    send(served.port, f"/served/{slow}-closed/?s=0"),
                )
                for _ in range(5)
            ]
            assert {(o.status, c.status) for o, c in while_down} == {(200, 429)}
            assert {c.headers["retry-after"] for _, c in while_down} == {"1"}
            # Decided by no one: no RateLimit fields.
            assert not any(o.policies or c.policies for o, c in while_down)
            log = served.site.output()
            assert "could not give back" in log
            assert "Traceback" not in log

            own.start()  # empty, on the same port

            def decided() -> bool:
                answer = send(served.port, f"/served/{slow}-closed/?s=0")
                return answer.status == 200 and answer.policies == {closed}

            wait_until(decided, WAIT, "Redis deciding again", 0.1)
