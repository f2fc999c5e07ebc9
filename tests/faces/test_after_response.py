"""After the response, through every face and both handlers: a concurrency slot is held
while the view runs and given back once the response is closed (a normal one, a view
that raised, a streaming one after its last chunk), and a policy that counts failures
or successes gets back the units of the responses it does not count."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.handlers.asgi import ASGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.http import HttpResponse
from django.test import override_settings
from django.urls import path

from ratelimits.conf import app_settings
from ratelimits.decorators import ratelimit
from ratelimits.engine.table.current import get_table
from tests.faces.after_urls import in_flight
from tests.helpers import create_policy, ratelimits_settings

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.after_urls")]

LIMITER = "ratelimits.middleware.RateLimitMiddleware"
#: Seconds a test waits for a view to start, or a slot to come back, before it fails: far
#: beyond what even a loaded machine takes.
WAIT = 30.0
# Each URL, and the endpoint of the policy that matches it.
FACES = {
    "/plain/": "plain",
    "/plain-async/": "plain-async",
    "/decorated/": "after",
    "/decorated-async/": "after",
    "/drf/": "after",
}


@pytest.fixture(autouse=True)
def patient_timeout() -> Iterator[None]:
    """A 10 s SOCKET_TIMEOUT: these tests expect Redis to decide every request, and under
    ASGI each request opens its connections on a loop of its own; on a loaded machine
    that may miss the 0.1 s default, and the fail mode (open) would answer instead."""
    with override_settings(RATELIMITS=ratelimits_settings(SOCKET_TIMEOUT=10.0)):
        yield


@pytest.fixture(params=["wsgi", "asgi"])
def get(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """A GET through the sync test client or the async one; both close the response as
    a server does, after its content."""
    if request.param == "wsgi":
        client = request.getfixturevalue("client")
        client.raise_request_exception = False
        return client.get
    client = request.getfixturevalue("async_client")
    client.raise_request_exception = False
    return async_to_sync(client.get)


@pytest.mark.parametrize("url", FACES)
def test_a_slot_is_held_while_the_view_runs_and_given_back_after(get, url):
    create_policy("slots", FACES[url], limit=1, window=60, algorithm="concurrency")
    for _ in range(3):  # one at a time: each finds the slot free again
        response = get(url)
        assert response.status_code == 200
        assert response.content.strip(b'"') == b"1"  # the view saw its own slot taken
        assert response["RateLimit"].endswith(";r=0;t=1")
        assert in_flight() == 0


@pytest.mark.parametrize("url", FACES)
def test_a_held_slot_denies_the_next_request(get, url, redis_client):
    policy = create_policy("slots", FACES[url], limit=1, window=60, algorithm="concurrency")
    # A request in progress elsewhere holds the only slot (a lease of this client).
    key = f"{app_settings.KEY_PREFIX}:{{ip:127.0.0.1}}:{policy.name}:leases"
    now_us = int(redis_client.time()[0]) * 1_000_000
    # The lease and the running total of the units held ("#", scored minus the total).
    redis_client.zadd(key, {f"{now_us}-0": now_us + 60_000_000, "#": -1})
    denied = get(url)
    assert denied.status_code == 429
    assert denied["Retry-After"] == "1"
    redis_client.delete(key)
    assert get(url).status_code == 200


@pytest.mark.parametrize("url", FACES)
def test_counts_failures_spends_only_on_failures(get, url):
    create_policy("signin", FACES[url], limit=2, window=60, counts="failures")
    assert [get(url, {"status": "200"}).status_code for _ in range(6)] == [200] * 6
    assert [get(url, {"status": "401"}).status_code for _ in range(2)] == [401, 401]
    # Over the limit a success is denied too, until a unit frees.
    assert get(url, {"status": "200"}).status_code == 429
    assert get(url, {"status": "401"}).status_code == 429


@pytest.mark.parametrize("url", FACES)
def test_counts_successes_spends_only_on_successes(get, url):
    create_policy("found", FACES[url], limit=2, window=60, counts="successes")
    assert [get(url, {"status": "404"}).status_code for _ in range(5)] == [404] * 5
    assert [get(url, {"status": "201"}).status_code for _ in range(3)] == [201, 201, 429]


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [("/raises/", "raises"), ("/decorated-raises/", "after"), ("/drf-raises/", "after")],
)
def test_a_view_that_raises_gives_its_slot_back_and_counts_as_a_failure(get, url, endpoint):
    create_policy("slots", endpoint, limit=1, window=60, algorithm="concurrency")
    create_policy("failures", endpoint, limit=2, window=60, counts="failures")
    assert [get(url).status_code for _ in range(3)] == [500, 500, 429]
    assert in_flight() == 0


def test_a_streaming_response_holds_its_slot_until_its_last_chunk(get):
    create_policy("slots", "streams", limit=1, window=60, algorithm="concurrency")
    response = get("/streams/")
    # Every chunk was made while the slot was held; the client has read them all now.
    assert b"".join(response.streaming_content) == b"1,1,1,"
    assert in_flight() == 0
    assert get("/streams/").status_code == 200


def test_drf_alone_reads_the_status_from_its_view(client):
    """Without the middleware the DRF throttle still gives back: the status is its
    view's response, and a view that raised is a 500."""
    create_policy("signin", "after", limit=1, window=60, counts="failures")
    create_policy("slots", "after", limit=1, window=60, algorithm="concurrency")
    client.raise_request_exception = False
    with override_settings(MIDDLEWARE=_without_limiter()):
        assert [client.get("/drf/").status_code for _ in range(3)] == [200] * 3
        assert in_flight() == 0
        assert client.get("/drf-raises/").status_code == 500  # a failure: spent
        assert in_flight() == 0
        assert client.get("/drf/").status_code == 429


def test_without_a_seen_status_the_units_stay_spent_and_it_is_said(client, caplog):
    """A face that cannot see the status (here a plain view checked only by a gate call
    without the middleware) keeps the units, and says how to fix it, once."""
    from ratelimits.http import view_asks

    def unseen(request):
        view_asks.check(request, "unseen", unseen)
        from django.http import HttpResponse

        return HttpResponse("ok")

    create_policy("unseen", "unseen", limit=1, window=60, counts="failures")
    urls = type("urls", (), {"urlpatterns": [path("unseen/", unseen)]})
    with (
        override_settings(MIDDLEWARE=_without_limiter(), ROOT_URLCONF=urls),
        caplog.at_level(logging.WARNING, logger="ratelimits"),
    ):
        assert client.get("/unseen/").status_code == 200
        assert "no face saw the status of a response under unseen" in caplog.text
        caplog.clear()
        client.get("/unseen/")
        assert "no face saw the status" not in caplog.text  # said once


def test_a_client_that_leaves_under_asgi_frees_its_slot():
    """ASGI cancels a request whose client disconnected before the response: there is no
    response to close, and the decorator (or the middleware) gives the slot back once
    the cancelled async view has stopped."""
    started = threading.Event()

    @ratelimit(scope="after")
    async def slow(request):
        started.set()
        await asyncio.sleep(30)

    create_policy("slots", "after", limit=1, window=60, algorithm="concurrency")
    leave_mid_view(slow, started)
    assert wait_for_no_slot_in_use()


def test_a_sync_view_running_on_after_its_client_left_keeps_its_slot_until_it_ends():
    """A sync view cannot be cancelled: its thread runs on after the client left, and its
    slot must stay taken until it ends, or a next request would run beside it."""
    started = threading.Event()
    seen_at_the_end: list[int] = []

    def slow(request):
        started.set()
        time.sleep(0.5)
        seen_at_the_end.append(in_flight())
        return HttpResponse("too late")

    create_policy("slots", "slow", limit=1, window=60, algorithm="concurrency")
    leave_mid_view(slow, started)
    assert seen_at_the_end == [1]  # still held after the client had gone
    assert wait_for_no_slot_in_use()


def leave_mid_view(view: Callable[..., Any], started: threading.Event) -> None:
    """Serve ``view`` at ``/slow/`` (URL name ``slow``) through Django's ASGI handler to a
    client that disconnects once the view has started; return when the handler has."""
    urls = type("urls", (), {"urlpatterns": [path("slow/", view, name="slow")]})

    async def scenario() -> None:
        sent = []

        async def receive() -> dict[str, Any]:
            if not sent:
                sent.append(1)
                return {"type": "http.request", "body": b"", "more_body": False}
            assert await asyncio.to_thread(started.wait, WAIT)
            assert await asyncio.to_thread(in_flight) == 1
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            raise AssertionError(f"nothing is sent to a client that left: {message}")

        scope = {
            "type": "http",
            "method": "GET",
            "path": "/slow/",
            "query_string": b"",
            "headers": [],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        await asyncio.wait_for(ASGIHandler()(scope, receive, send), 2 * WAIT)

    # As Django's test client does: the handler's signals must not close the test database.
    signals = (request_started, request_finished)
    for signal in signals:
        signal.disconnect(close_old_connections)
    try:
        with override_settings(ROOT_URLCONF=urls):
            get_table()  # built here, where the test's policies are visible
            # A loop of its own, as a server runs: not under async_to_sync, whose calling
            # thread would run the sync view instead of the request's own thread.
            asyncio.run(scenario())
    finally:
        for signal in signals:
            signal.connect(close_old_connections)


def wait_for_no_slot_in_use(seconds: float = WAIT) -> bool:
    """True once no slot is in use (given back on a thread), within ``seconds``."""
    deadline = time.monotonic() + seconds
    while in_flight() and time.monotonic() < deadline:
        time.sleep(0.02)
    return in_flight() == 0


def _without_limiter() -> list[str]:
    from django.conf import settings

    return [m for m in settings.MIDDLEWARE if m != LIMITER]
