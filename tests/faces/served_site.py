"""The demo site with test-only views, served by gunicorn and uvicorn for
``tests/faces/test_after_response_served.py`` (settings: ``tests.faces.served_settings``).

The views under ``/served/`` count themselves in a Redis of the tests' own choosing
(``SERVED_TRACK_URL``, else ``REDIS_URL``), under keys outside the limiter's prefix:

- ``served:<tag>:now``: requests of ``tag`` inside the view now;
- ``served:<tag>:max``: the most there ever were at once;
- ``served:<tag>:pids``: the processes that ran them.

So a test reads how many requests were in progress at once as the views saw it, whatever
the limiter says. :func:`served_by` names the worker process that answered each
response (``X-Served-By``), whichever face answered it.

A view given ``hold=GATE`` stays in the view (a stream: before each next chunk ``n``,
gate ``GATE:n``) until the test opens the gate (sets :func:`gate_key`), not for a number
of seconds: what a test sees while a request is in progress does not depend on how fast
the machine runs it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import redis
import redis.asyncio
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import include, path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from project.api.urls import urlpatterns as api_urls
from project.api.views import ReportView
from ratelimits.decorators import ratelimit

#: The prefix of the views' own keys (the limiter's is ``rl``).
TRACK_PREFIX = "served"

#: Counts one request in (KEYS: now, max, pids; ARGV: pid): returns how many are in now.
_ENTER = """
local now = redis.call('INCR', KEYS[1])
if now > tonumber(redis.call('GET', KEYS[2]) or '0') then
  redis.call('SET', KEYS[2], now)
end
redis.call('SADD', KEYS[3], ARGV[1])
return now
"""


#: Seconds a held view waits for its gate at most: a test that failed before opening it
#: does not keep a worker's thread for good.
GATE_TIMEOUT = 60.0
#: Seconds between two looks at a gate.
GATE_POLL = 0.005


def gate_key(gate: str) -> str:
    """The key that opens ``gate`` once it exists (the tests' Redis, as the counts)."""
    return f"{TRACK_PREFIX}:gate:{gate}"


def _wait_for_gate(gate: str) -> None:
    deadline = time.monotonic() + GATE_TIMEOUT
    while not _tracker().exists(gate_key(gate)) and time.monotonic() < deadline:
        time.sleep(GATE_POLL)


async def _await_gate(gate: str) -> None:
    deadline = time.monotonic() + GATE_TIMEOUT
    while not await _async_tracker().exists(gate_key(gate)) and time.monotonic() < deadline:
        await asyncio.sleep(GATE_POLL)


def track_keys(tag: str) -> tuple[str, str, str]:
    """The keys of ``tag``: in the view now, the most at once, the processes."""
    return (f"{TRACK_PREFIX}:{tag}:now", f"{TRACK_PREFIX}:{tag}:max", f"{TRACK_PREFIX}:{tag}:pids")


def _track_url() -> str:
    return os.environ.get("SERVED_TRACK_URL") or os.environ["REDIS_URL"]


_client: redis.Redis | None = None
_async_clients: dict[int, redis.asyncio.Redis] = {}


def _tracker() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(_track_url(), socket_timeout=5)
    return _client


def _async_tracker() -> redis.asyncio.Redis:
    """A client of the running event loop (a worker has one)."""
    loop = id(asyncio.get_running_loop())
    if loop not in _async_clients:
        _async_clients[loop] = redis.asyncio.Redis.from_url(_track_url(), socket_timeout=5)
    return _async_clients[loop]


def _arguments(request: HttpRequest) -> tuple[str, float, str | None]:
    return request.GET.get("tag", "slow"), float(request.GET.get("s", "1")), request.GET.get("hold")


def _stay(request: HttpRequest) -> str:
    """Counts this request into its tag, stays in the view until gate ``hold`` opens (else
    ``s`` seconds), counts it out; returns the tag."""
    tag, seconds, gate = _arguments(request)
    keys = track_keys(tag)
    client = _tracker()
    client.eval(_ENTER, 3, *keys, os.getpid())
    try:
        if gate is not None:
            _wait_for_gate(gate)
        else:
            time.sleep(seconds)
    finally:
        client.decr(keys[0])
    return tag


def served_by(get_response: Callable[[HttpRequest], Any]) -> Callable[[HttpRequest], Any]:
    """Middleware (outermost): ``X-Served-By: <pid>`` on every response."""
    pid = str(os.getpid())
    if asyncio.iscoroutinefunction(get_response):

        async def amiddleware(request: HttpRequest) -> Any:
            response = await get_response(request)
            response["X-Served-By"] = pid
            return response

        return amiddleware

    def middleware(request: HttpRequest) -> Any:
        response = get_response(request)
        response["X-Served-By"] = pid
        return response

    return middleware


served_by.sync_capable = True  # type: ignore[attr-defined]
served_by.async_capable = True  # type: ignore[attr-defined]


def slow(request: HttpRequest) -> JsonResponse:
    """``GET /served/slow/?s=SECONDS&tag=TAG`` (or ``hold=GATE``): counts itself in,
    stays, counts out."""
    tag = _stay(request)
    return JsonResponse({"pid": os.getpid(), "tag": tag})


async def aslow(request: HttpRequest) -> JsonResponse:
    """``GET /served/aslow/``: :func:`slow` as a coroutine (on the event loop under ASGI)."""
    tag, seconds, gate = _arguments(request)
    keys = track_keys(tag)
    client = _async_tracker()
    await client.eval(_ENTER, 3, *keys, os.getpid())
    try:
        if gate is not None:
            await _await_gate(gate)
        else:
            await asyncio.sleep(seconds)
    finally:
        await client.decr(keys[0])
    return JsonResponse({"pid": os.getpid(), "tag": tag})


def raises(request: HttpRequest) -> HttpResponse:
    """``GET /served/raises/?s=SECONDS``: in the view for ``s`` seconds, then raises
    (Django answers 500)."""
    _stay(request)
    raise RuntimeError("served: the view raised, as asked")


class ApiRaises(APIView):
    """``GET /served/api-raises/``: a DRF view that raises an error DRF does not handle
    (Django answers 500; DRF's view keeps no response)."""

    def get(self, request: Request) -> Response:
        _stay(request)
        raise RuntimeError("served: the DRF view raised, as asked")


def _chunks(request: HttpRequest) -> tuple[int, float, str | None]:
    return (
        int(request.GET.get("n", "4")),
        float(request.GET.get("gap", "0.3")),
        request.GET.get("hold"),
    )


def stream(request: HttpRequest) -> StreamingHttpResponse:
    """``GET /served/stream/?n=CHUNKS&gap=SECONDS``: ``n`` lines, ``gap`` seconds apart
    (with ``hold=GATE``: chunk ``n`` once gate ``GATE:n`` opens); a WSGI server writes
    each as it comes."""
    count, gap, gate = _chunks(request)

    def lines() -> Iterator[bytes]:
        for n in range(count):
            if n and gate is not None:
                _wait_for_gate(f"{gate}:{n}")
            elif n:
                time.sleep(gap)
            yield f"chunk {n}\n".encode()

    return StreamingHttpResponse(lines(), content_type="text/plain")


def astream(request: HttpRequest) -> StreamingHttpResponse:
    """``GET /served/astream/``: :func:`stream` from an asynchronous iterator (an ASGI
    server sends each line as it comes; a synchronous one would be read whole first)."""
    count, gap, gate = _chunks(request)

    async def lines() -> AsyncIterator[bytes]:
        for n in range(count):
            if n and gate is not None:
                await _await_gate(f"{gate}:{n}")
            elif n:
                await asyncio.sleep(gap)
            yield f"chunk {n}\n".encode()

    return StreamingHttpResponse(lines(), content_type="text/plain")


@ratelimit(scope="served-status")
def status(request: HttpRequest) -> HttpResponse:
    """``GET /served/status/?code=CODE``: answers ``code``; under the decorator, scope
    ``served-status``."""
    code = int(request.GET.get("code", "200"))
    return HttpResponse(f"{code}\n", status=code, content_type="text/plain")


class HeldReport(ReportView):
    """The demo's ``GET /api/report/`` (URL name ``api:report``, its policy's endpoint),
    which with ``?hold=GATE`` waits for the gate before it builds the report."""

    def get(self, request: Request) -> Response:
        gate = request.query_params.get("hold")
        if gate is not None:
            _wait_for_gate(gate)
        return super().get(request)


served_patterns = [
    path("slow/", slow, name="slow"),
    path("slow-closed/", slow, name="slow-closed"),
    path("aslow/", aslow, name="aslow"),
    path("aslow-closed/", aslow, name="aslow-closed"),
    path("raises/", raises, name="raises"),
    path("api-raises/", ApiRaises.as_view(), name="api-raises"),
    path("stream/", stream, name="stream"),
    path("astream/", astream, name="astream"),
    path("status/", status, name="status"),
]

urlpatterns = [
    path("served/", include((served_patterns, "served"))),
    # The demo's API (ahead of the demo's own include of it), the report held.
    path(
        "api/", include(([path("report/", HeldReport.as_view(), name="report"), *api_urls], "api"))
    ),
    path("", include("project.urls")),
]
