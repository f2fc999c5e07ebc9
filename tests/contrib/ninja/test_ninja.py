"""The django-ninja face, ``ratelimits.contrib.ninja.PolicyThrottle``, through the Django
test client, against the real Redis the test run starts."""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings as django_settings
from django.test import AsyncClient
from django.test.client import RequestFactory
from django.urls import resolve

from project.api.demo_policies import DEMO_POLICIES
from ratelimits.contrib.ninja import PolicyThrottle
from ratelimits.models import Policy
from ratelimits.signals import request_near_limit, request_throttled
from tests.helpers import create_policy, decide_calls, statuses, wait_clear_of_window_boundary

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.contrib.ninja.urls")]

BASE = "/ninja-test"
LIMITER = "ratelimits.middleware.RateLimitMiddleware"
#: django-ninja's own 429 body (RateLimitMiddleware's is another): the throttle answered.
NINJA_429 = {"detail": "Too many requests."}


@pytest.fixture
def without_middleware(settings: Any) -> None:
    """The site without RateLimitMiddleware (the header middleware stays): only the
    throttle limits."""
    assert LIMITER in settings.MIDDLEWARE
    settings.MIDDLEWARE = [name for name in settings.MIDDLEWARE if name != LIMITER]


@pytest.fixture
def throttled_senders() -> Any:
    """The senders of ``request_throttled``, in order."""
    senders: list[object] = []

    def receiver(sender: object, **kwargs: Any) -> None:
        senders.append(sender)

    request_throttled.connect(receiver)
    yield senders
    request_throttled.disconnect(receiver)


def remaining(response: Any, policy: str) -> int:
    """``r`` of ``policy`` in the response's ``RateLimit`` field."""
    for member in response["RateLimit"].split(", "):
        name, *params = member.split(";")
        if name == f'"{policy}"':
            return int(dict(param.split("=") for param in params)["r"])
    raise AssertionError(f"{policy} not in {response['RateLimit']!r}")


def assert_ninja_429(
    response: Any, policy: str, limit: int, window: int, *, soonest: int | None = None
) -> None:
    """django-ninja's 429, with ``Retry-After`` (``window`` rounded up, unless ``soonest``
    allows less) and the RateLimit fields."""
    assert response.status_code == 429
    assert json.loads(response.content) == NINJA_429
    soonest = window - 1 if soonest is None else soonest
    assert soonest <= int(response["Retry-After"]) <= window
    assert f'"{policy}";q={limit};w={window}' in response["RateLimit-Policy"]
    assert remaining(response, policy) == 0


# --- the API-level throttle ----------------------------------------------------------------


def test_the_limit_then_a_429_with_retry_after_and_ratelimit_fields(client, without_middleware):
    create_policy("plain", "faces-ninja:plain", limit=3, window=60)
    allowed = [client.get(f"{BASE}/plain") for _ in range(3)]
    assert [r.status_code for r in allowed] == [200, 200, 200]
    assert [remaining(r, "plain") for r in allowed] == [2, 1, 0]
    assert all(r["RateLimit-Policy"] == '"plain";q=3;w=60' for r in allowed)
    assert_ninja_429(client.get(f"{BASE}/plain"), "plain", 3, 60)


@pytest.mark.parametrize(
    "endpoint",
    ["faces-ninja:plain", f"{BASE}/plain", f"{BASE}/*"],
    ids=["url_name", "path", "glob"],
)
def test_a_policy_matches_by_url_name_path_or_glob(client, without_middleware, endpoint):
    create_policy("p", endpoint, limit=1)
    assert statuses(client, f"{BASE}/plain", 3) == [200, 429, 429]


def test_an_operation_no_policy_matches_is_not_limited(client, without_middleware):
    create_policy("other", "faces-ninja:scoped", limit=1)
    responses = [client.get(f"{BASE}/plain") for _ in range(4)]
    assert [r.status_code for r in responses] == [200] * 4
    assert all("RateLimit" not in r for r in responses)
    assert statuses(client, f"{BASE}/scoped", 2) == [200, 429]


def test_request_throttled_is_sent_by_the_ninja_throttle(
    client, without_middleware, throttled_senders
):
    create_policy("plain", "faces-ninja:plain", limit=2)
    assert statuses(client, f"{BASE}/plain", 4) == [200, 200, 429, 429]
    assert throttled_senders == [PolicyThrottle, PolicyThrottle]


def test_request_near_limit_is_sent_by_the_ninja_throttle(client, settings, without_middleware):
    settings.RATELIMITS = {**settings.RATELIMITS, "NEAR_LIMIT": 0.8}
    sent: list[tuple[object, str]] = []

    def receiver(sender: object, **kwargs: Any) -> None:
        sent.append((sender, kwargs["policy"]))

    request_near_limit.connect(receiver)
    try:
        create_policy("plain", "faces-ninja:plain", limit=5)
        assert statuses(client, f"{BASE}/plain", 6) == [200] * 5 + [429]
    finally:
        request_near_limit.disconnect(receiver)
    assert sent == [(PolicyThrottle, "plain")]  # the 4th of 5, once


def test_methods_restrict_a_policy(client, without_middleware):
    create_policy("posts", "faces-ninja:plain", limit=1, methods="POST")
    create_policy("gets", "faces-ninja:plain", limit=2, methods="GET")
    responses = [client.get(f"{BASE}/plain") for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 429]
    assert all('"posts"' not in r["RateLimit-Policy"] for r in responses)


# --- scopes: one operation, one router ------------------------------------------------------


def test_an_operation_scope_applies_its_policies(client, throttled_senders):
    # RateLimitMiddleware (installed) cannot see the scope: only the throttle applies it.
    create_policy("scoped", "scoped", limit=2)
    assert statuses(client, f"{BASE}/scoped", 2) == [200, 200]
    assert_ninja_429(client.get(f"{BASE}/scoped"), "scoped", 2, 60)
    assert throttled_senders == [PolicyThrottle]


def test_a_scope_applies_only_where_it_is_given(client):
    create_policy("scoped", "scoped", limit=1)
    assert statuses(client, f"{BASE}/plain", 3) == [200, 200, 200]
    assert statuses(client, f"{BASE}/scoped", 2) == [200, 429]


def test_a_router_scope_covers_every_operation_of_the_router(client):
    create_policy("routed", "routed", limit=3)
    assert statuses(client, f"{BASE}/router/a", 2) == [200, 200]
    assert client.get(f"{BASE}/router/b").status_code == 200
    assert_ninja_429(client.get(f"{BASE}/router/b"), "routed", 3, 60)
    assert client.get(f"{BASE}/router/a").status_code == 429
    # The router's throttle replaces the API's; other operations are not in the scope.
    assert statuses(client, f"{BASE}/plain", 2) == [200, 200]


def test_a_bad_scope_is_refused():
    with pytest.raises(TypeError, match="policy endpoint name"):
        PolicyThrottle(scope=" ")
    assert PolicyThrottle(scope="x").ratelimit_scope == "x"


# --- once per policy per request, with RateLimitMiddleware ----------------------------------


def test_with_the_middleware_a_request_spends_one_unit_per_policy(client, redis_client):
    assert LIMITER in django_settings.MIDDLEWARE
    create_policy("plain", "faces-ninja:plain", limit=5)
    calls = decide_calls(redis_client)
    responses = [client.get(f"{BASE}/plain") for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 200]
    assert [remaining(r, "plain") for r in responses] == [4, 3, 2]
    assert decide_calls(redis_client) - calls == 3  # the middleware's: none by the throttle
    assert statuses(client, f"{BASE}/plain", 3) == [200, 200, 429]


def test_under_the_middleware_the_throttle_decides_every_policy_in_one_call(
    client, redis_client, throttled_senders
):
    """RateLimitMiddleware leaves an operation under PolicyThrottle to it: its URL-name
    policy and its scope policy are decided together, after django-ninja's auth."""
    create_policy("by-name", "faces-ninja:scoped", limit=5)
    create_policy("by-scope", "scoped", limit=3)
    calls = decide_calls(redis_client)
    responses = [client.get(f"{BASE}/scoped") for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 200]
    assert [remaining(r, "by-name") for r in responses] == [4, 3, 2]
    assert [remaining(r, "by-scope") for r in responses] == [2, 1, 0]
    assert decide_calls(redis_client) - calls == 3  # one per request, both policies
    denied = client.get(f"{BASE}/scoped")
    assert_ninja_429(denied, "by-scope", 3, 60)
    assert throttled_senders == [PolicyThrottle]


@pytest.mark.parametrize("middleware", [True, False], ids=["middleware", "throttle-only"])
def test_a_url_name_policy_is_answered_the_ninja_way(client, settings, middleware):
    """With or without RateLimitMiddleware, the 429 of a URL-name policy on an operation
    under the throttle is django-ninja's (its JSON body), not the middleware's."""
    if not middleware:
        settings.MIDDLEWARE = [name for name in settings.MIDDLEWARE if name != LIMITER]
    create_policy("by-name", "faces-ninja:plain", limit=1)
    assert client.get(f"{BASE}/plain").status_code == 200
    assert_ninja_429(client.get(f"{BASE}/plain"), "by-name", 1, 60)


def test_the_middleware_still_decides_an_operation_without_the_throttle(client):
    """An operation whose throttles are not PolicyThrottle (here: none) is the
    middleware's, with the middleware's 429."""
    create_policy("by-name", "faces-ninja:unthrottled", limit=1)
    assert client.get(f"{BASE}/unthrottled").status_code == 200
    denied = client.get(f"{BASE}/unthrottled")
    assert denied.status_code == 429
    assert denied.content.startswith(b"Too many requests. Try again in ")  # the middleware's


# --- async operations -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_async_operation_is_limited_and_its_user_loaded_without_blocking_the_loop(
    client, alice, redis_client, without_middleware, throttled_senders
):
    # A per-user policy: the lazy request.user is a database query, which Django refuses
    # on the event loop the async operation runs on; it is loaded with request.auser().
    create_policy("async", "faces-ninja:async_items", limit=2, key="user")
    client.force_login(alice)
    assert statuses(client, f"{BASE}/async", 2) == [200, 200]
    assert_ninja_429(client.get(f"{BASE}/async"), "async", 2, 60)
    assert throttled_senders == [PolicyThrottle]
    keys = [key.decode() for key in redis_client.keys("*")]
    assert any(f"{{u:{alice.pk}}}" in key for key in keys), keys


#: Set by a test around its requests, read by a ``request_throttled`` receiver.
REQUEST_TAG: contextvars.ContextVar[str] = contextvars.ContextVar("request_tag", default="")


@pytest.mark.django_db(transaction=True)
def test_an_async_operations_receivers_run_in_the_request_context(client, without_middleware):
    create_policy("async", "faces-ninja:async_items", limit=1)
    tags: list[str] = []

    def receiver(sender: object, **kwargs: Any) -> None:
        tags.append(REQUEST_TAG.get())

    request_throttled.connect(receiver)
    token = REQUEST_TAG.set("request 2")
    try:
        assert statuses(client, f"{BASE}/async", 2) == [200, 429]
    finally:
        REQUEST_TAG.reset(token)
        request_throttled.disconnect(receiver)
    assert tags == ["request 2"]


@pytest.mark.django_db(transaction=True)
def test_an_async_operation_under_asgi_with_the_middleware(alice, redis_client):
    """Under the async handler the middleware leaves the operation to the throttle, which
    decides both policies in one call on the loop, after authentication."""
    create_policy("by-name", "faces-ninja:async_scoped", limit=5)
    create_policy("by-scope", "async-scoped", limit=3, key="user")
    calls: list[int] = []

    async def run() -> list[Any]:
        client = AsyncClient()  # the async handler: RateLimitMiddleware on the loop
        await client.aforce_login(alice)
        calls.append(decide_calls(redis_client))
        responses = [await client.get(f"{BASE}/async-scoped") for _ in range(3)]
        calls.append(decide_calls(redis_client))
        return [*responses, await client.get(f"{BASE}/async-scoped")]

    responses = async_to_sync(run)()
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    assert [remaining(r, "by-name") for r in responses[:3]] == [4, 3, 2]
    assert [remaining(r, "by-scope") for r in responses[:3]] == [2, 1, 0]
    assert calls[1] - calls[0] == 3  # one per request, both policies
    assert_ninja_429(responses[3], "by-scope", 3, 60)
    keys = [key.decode() for key in redis_client.keys("*")]
    assert any(f"{{u:{alice.pk}}}" in key for key in keys), keys


#: How long the test below pauses Redis: far above a tick of the loop, below the timeout.
PAUSE = 1.0


@pytest.mark.django_db(transaction=True)
def test_an_async_operation_under_a_slow_redis_leaves_its_loop_running(
    redis_client, settings, without_middleware
):
    """The decide call of an async operation is awaited on its event loop: while Redis
    is slow to answer (paused), another coroutine on that loop keeps running."""
    settings.RATELIMITS = {**settings.RATELIMITS, "SOCKET_TIMEOUT": 5 * PAUSE}
    create_policy("async", "faces-ninja:async_items", limit=10)

    async def run() -> tuple[int, float, float]:
        client = AsyncClient()
        assert (await client.get(f"{BASE}/async")).status_code == 200  # table, connection
        gaps: list[float] = []
        stop = asyncio.Event()

        async def tick() -> None:
            last = time.monotonic()
            while not stop.is_set():
                await asyncio.sleep(0.01)
                gaps.append(time.monotonic() - last)
                last = time.monotonic()

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.05)
        redis_client.execute_command("CLIENT", "PAUSE", int(PAUSE * 1000))
        started = time.monotonic()
        response = await client.get(f"{BASE}/async")
        took = time.monotonic() - started
        stop.set()
        await ticker
        return response.status_code, took, max(gaps)

    status, took, longest_gap = async_to_sync(run)()
    assert status == 200
    assert took >= 0.8 * PAUSE  # decided by the paused server, not by a fail mode
    assert longest_gap < PAUSE / 2, f"the loop stood still for {longest_gap:.2f} s"


# --- the verdict belongs to the request, not to the shared throttle -------------------------


def test_wait_answers_for_the_request_of_its_context_on_a_shared_throttle():
    create_policy("scoped", "scoped", limit=1, key="ip")
    throttle = PolicyThrottle(scope="scoped")

    def request(ip: str) -> Any:
        made = RequestFactory().get(f"{BASE}/scoped", REMOTE_ADDR=ip)
        made.resolver_match = resolve(f"{BASE}/scoped")
        return made

    first, second = contextvars.Context(), contextvars.Context()
    assert first.run(throttle.allow_request, request("198.51.100.1")) is True
    assert first.run(throttle.allow_request, request("198.51.100.1")) is False
    # Meanwhile another request, from another client, on the same instance:
    assert second.run(throttle.allow_request, request("198.51.100.2")) is True
    assert second.run(throttle.wait) is None
    wait = first.run(throttle.wait)
    assert wait is not None and 59 <= wait <= 60


# --- the demo -------------------------------------------------------------------------------


@pytest.mark.urls("project.urls")
def test_the_demo_ninja_items_under_its_policy(client, without_middleware):
    fields = next(p for p in DEMO_POLICIES if p["name"] == "ninja-items")
    policy = Policy(**fields)
    policy.full_clean()
    policy.save()
    wait_clear_of_window_boundary(policy.window, margin=3)
    responses = [client.get("/ninja/items") for _ in range(policy.limit)]
    assert [r.status_code for r in responses] == [200] * policy.limit
    assert json.loads(responses[0].content)[0] == {"id": 1, "name": "item 1"}
    denied = client.get("/ninja/items")
    # A fixed window frees its units at the window's end: 1 to 10 seconds away.
    assert_ninja_429(denied, "ninja-items", policy.limit, policy.window, soonest=1)


@pytest.mark.parametrize("middleware", [True, False], ids=["middleware", "throttle-alone"])
def test_an_operations_slot_is_given_back_after_its_response(client, settings, middleware):
    if not middleware:
        settings.MIDDLEWARE = [name for name in settings.MIDDLEWARE if name != LIMITER]
    create_policy("slots", "status", limit=1, window=60, algorithm="concurrency")
    for _ in range(3):
        response = client.get(f"{BASE}/status")
        assert response.status_code == 200
        assert response.json() == {"in_flight": 1}
    from tests.faces.after_urls import in_flight

    assert in_flight() == 0


def test_an_operation_counts_only_failures_under_the_middleware(client):
    """django-ninja shows a throttle no response: RateLimitMiddleware notes its status."""
    create_policy("signin", "status", limit=2, window=60, counts="failures")
    assert statuses(client, f"{BASE}/status", 5) == [200] * 5
    assert statuses(client, f"{BASE}/status?status=401", 3) == [401, 401, 429]
