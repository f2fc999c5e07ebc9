"""RateLimitMiddleware and the ratelimit decorator on every kind of Django view, through
the WSGI handler (sync middleware chain) and the ASGI handler (async chain, decided on
the event loop)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import override_settings

from ratelimits.decorators import ratelimit
from ratelimits.http.pipeline import drivers
from ratelimits.middleware import RateLimitMiddleware
from ratelimits.signals import request_near_limit, request_throttled
from ratelimits.testutils import free_port
from ratelimits.throttling import PolicyThrottle
from tests.helpers import (
    caches_at,
    create_policy,
    decide_calls,
    ratelimits_settings,
    signal_senders,
)

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.urls")]

VIEWS = [
    "/sync/",
    "/class/",
    "/async/",
    "/decorated/sync/",
    "/decorated/async/",
    "/decorated/class/",
]


@pytest.fixture(params=["wsgi", "asgi"])
def get(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """A GET through the sync test client, or through the async one (the ASGI handler):
    there the sync ``decide`` must not run on the loop, every decision made there is
    awaited (DRF's throttle runs in the sync view's thread)."""
    if request.param == "wsgi":
        return request.getfixturevalue("client").get
    async_client = request.getfixturevalue("async_client")
    sync_decide = drivers.decide

    def off_the_loop_only(*args: Any, **kwargs: Any) -> Any:
        if on_a_loop():
            raise AssertionError("the sync decide ran on the event loop")
        return sync_decide(*args, **kwargs)

    monkeypatch.setattr(drivers, "decide", off_the_loop_only)
    return async_to_sync(async_client.get)


def on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def remaining(response: Any) -> int:
    """``r`` of the RateLimit field (one policy)."""
    return int(response["RateLimit"].split(";r=")[1].split(";")[0])


@pytest.mark.parametrize("url", VIEWS)
def test_every_view_gets_exactly_its_limit_then_429(get, url):
    create_policy("p", url, limit=3, window=60)
    responses = [get(url) for _ in range(5)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429, 429]
    assert [remaining(r) for r in responses[:3]] == [2, 1, 0]
    for denied in responses[3:]:
        assert 59 <= int(denied["Retry-After"]) <= 60
        assert denied["RateLimit-Policy"] == '"p";q=3;w=60'
        assert remaining(denied) == 0


@pytest.mark.parametrize("url", ["/decorated/sync/", "/decorated/async/", "/decorated/class/"])
def test_the_decorator_applies_its_scope_once_with_the_middleware(get, url, redis_client):
    create_policy("by-scope", "decorated", limit=2)
    create_policy("by-path", url, limit=5)
    before = decide_calls(redis_client)
    responses = [get(url) for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 429]
    # One unit per policy per request, in one call: the middleware reads the scope. (The
    # denial is remembered from the call that spent the last unit: no call for it.)
    fields = sorted(responses[1]["RateLimit"].split(", "))
    assert fields == ['"by-path";r=3;t=60', '"by-scope";r=0;t=60']
    assert decide_calls(redis_client) - before == 2


@pytest.mark.parametrize("url", ["/decorated/sync/", "/decorated/async/", "/decorated/class/"])
@pytest.mark.parametrize("handler", ["client", "async_client"])
def test_the_decorator_works_without_the_middleware(request, handler, url, settings):
    """A decorated sync view decides in its own thread, an async one on the loop."""
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if not m.endswith("RateLimitMiddleware")]
    create_policy("by-scope", "decorated", limit=2)
    get = request.getfixturevalue(handler).get
    if handler == "async_client":
        get = async_to_sync(get)
    responses = [get(url) for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 429]
    assert [remaining(r) for r in responses] == [1, 0, 0]


def test_a_scope_applies_only_to_views_that_carry_it(get):
    create_policy("by-scope", "decorated", limit=1)
    assert [get("/sync/").status_code for _ in range(3)] == [200, 200, 200]
    assert [get("/decorated/sync/").status_code for _ in range(2)] == [200, 429]


def test_a_drf_view_under_policythrottle_counts_once(get, redis_client):
    create_policy("items", "api:items", limit=3)
    before = decide_calls(redis_client)
    responses = [get("/api/items/") for _ in range(4)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    assert [remaining(r) for r in responses[:3]] == [2, 1, 0]
    assert decide_calls(redis_client) - before == 3  # the denial is remembered


def test_a_drf_view_is_decided_after_drf_authentication(client):
    """Two users of HTTP Basic auth from one address: DRF knows them, Django's
    middleware phase does not; a user_or_ip policy counts them apart."""
    create_policy("items", "api:items", limit=2, key="user_or_ip")
    for name in ("ann", "bob"):
        User.objects.create_user(name, password="pw")
        token = base64.b64encode(f"{name}:pw".encode()).decode()
        auth = {"HTTP_AUTHORIZATION": f"Basic {token}"}
        statuses = [client.get("/api/items/", **auth).status_code for _ in range(3)]
        assert statuses == [200, 200, 429], name


@pytest.fixture
def throttled_senders() -> Iterator[list[Any]]:
    with signal_senders(request_throttled) as senders:
        yield senders


def test_request_throttled_is_sent_by_the_face_that_denied(get, throttled_senders):
    create_policy("p", "/sync/", limit=1)
    create_policy("s", "decorated", limit=1)
    create_policy("items", "api:items", limit=1)
    for url in ("/sync/", "/decorated/sync/", "/api/items/"):
        get(url)
        get(url)
    assert throttled_senders == [
        (RateLimitMiddleware, "p"),
        (RateLimitMiddleware, "s"),
        (PolicyThrottle, "items"),
    ]


def test_the_decorator_sends_as_itself_without_the_middleware(client, settings, throttled_senders):
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if not m.endswith("RateLimitMiddleware")]
    create_policy("s", "decorated", limit=1)
    client.get("/decorated/async/")
    client.get("/decorated/async/")
    assert throttled_senders == [(ratelimit, "s")]


@pytest.fixture
def near_senders(settings: Any) -> Iterator[list[Any]]:
    """``(sender, policy)`` of every request_near_limit, at NEAR_LIMIT 0.8."""
    settings.RATELIMITS = {**settings.RATELIMITS, "NEAR_LIMIT": 0.8}
    with signal_senders(request_near_limit) as senders:
        yield senders


def test_request_near_limit_is_sent_by_the_face_that_admitted(get, near_senders):
    create_policy("p", "/sync/", limit=5)
    create_policy("s", "decorated", limit=5)
    create_policy("items", "api:items", limit=5)
    for url in ("/sync/", "/decorated/sync/", "/api/items/"):
        assert [get(url).status_code for _ in range(6)] == [200] * 5 + [429]
    # Each crossed with its 4th request (80% of 5), once.
    assert near_senders == [
        (RateLimitMiddleware, "p"),
        (RateLimitMiddleware, "s"),
        (PolicyThrottle, "items"),
    ]


@pytest.mark.parametrize("url", ["/decorated/sync/", "/decorated/async/"])
def test_the_decorator_sends_request_near_limit_as_itself(client, settings, url, near_senders):
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if not m.endswith("RateLimitMiddleware")]
    create_policy("s", "decorated", limit=5)
    assert [client.get(url).status_code for _ in range(6)] == [200] * 5 + [429]
    assert near_senders == [(ratelimit, "s")]


def test_an_async_near_limit_receiver_is_awaited_on_the_async_path(async_client):
    seen: list[tuple[str, int]] = []

    async def receiver(sender: Any, **kwargs: Any) -> None:
        seen.append((kwargs["policy"], kwargs["decision"].remaining))

    request_near_limit.connect(receiver)
    try:
        create_policy("p", "/async/", limit=5)
        get = async_to_sync(async_client.get)
        assert [get("/async/").status_code for _ in range(5)] == [200] * 5
    finally:
        request_near_limit.disconnect(receiver)
    assert seen == [("p", 1)]  # the 4th of 5


def test_an_async_receiver_is_awaited_on_the_async_path(async_client):
    seen: list[str] = []

    async def receiver(sender: Any, **kwargs: Any) -> None:
        seen.append(kwargs["policy"])

    request_throttled.connect(receiver)
    try:
        create_policy("p", "/async/", limit=1)
        get = async_to_sync(async_client.get)
        assert [get("/async/").status_code for _ in range(2)] == [200, 429]
    finally:
        request_throttled.disconnect(receiver)
    assert seen == ["p"]


def test_a_user_policy_counts_each_user_on_the_async_path(async_client, monkeypatch):
    monkeypatch.setattr(drivers, "decide", None)  # the sync path must not run
    create_policy("per-user", "whoami", limit=2, key="user")
    get = async_to_sync(async_client.get)
    # Anonymous requests are not counted by a user policy.
    assert [get("/whoami/").status_code for _ in range(3)] == [200, 200, 200]
    for name in ("ann", "bob"):
        user = User.objects.create_user(name, password="pw")
        async_to_sync(async_client.aforce_login)(user)
        responses = [get("/whoami/") for _ in range(3)]
        assert [r.status_code for r in responses] == [200, 200, 429], name
        assert responses[0].json() == {"user": name}


def test_a_forged_forwarded_for_does_not_escape_the_ip_limit(get):
    create_policy("p", "/async/", limit=2, key="ip")
    statuses = [get("/async/", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}").status_code for n in range(4)]
    assert statuses == [200, 200, 429, 429]


def test_a_view_no_policy_matches_is_untouched(get):
    create_policy("p", "/class/", limit=1)
    responses = [get("/sync/") for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 200]
    assert all(not r.has_header("RateLimit") for r in responses)


def test_headers_off_still_send_retry_after(get, settings):
    settings.RATELIMITS = ratelimits_settings(HEADERS=False)
    create_policy("p", "/async/", limit=1)
    responses = [get("/async/") for _ in range(2)]
    assert [r.status_code for r in responses] == [200, 429]
    assert responses[1]["Retry-After"] == "60"
    assert not any(r.has_header("RateLimit") for r in responses)


@pytest.mark.parametrize(("fail_open", "status"), [(True, 200), (False, 429)])
def test_redis_down_gives_the_fail_mode(get, fail_open, status):
    create_policy("p", "/async/", limit=1, fail_open=fail_open)
    with override_settings(CACHES=caches_at(free_port())):
        responses = [get("/async/") for _ in range(3)]
    assert [r.status_code for r in responses] == [status] * 3
    if not fail_open:
        assert responses[0]["Retry-After"] == "1"  # FAIL_CLOSED_RETRY_AFTER


def test_the_decorator_needs_a_scope():
    with pytest.raises(TypeError, match="scope"):
        ratelimit(scope="")
    with pytest.raises(TypeError):
        ratelimit()  # type: ignore[call-arg]
