"""``RATELIMITS["MODE"] = "off"``: every face lets every request through, past any limit,
without a single Redis command (counted by the server's ``INFO commandstats``) and
without RateLimit headers; the usage endpoint says so. ``limits_off()`` sets it for a
test, as a context manager and as a decorator."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import RequestFactory, override_settings

from ratelimits.backends import RateLimitBackend
from ratelimits.testutils import limits_off
from tests.helpers import commands_sent, create_policy, ratelimits_settings

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.urls")]

OFF = ratelimits_settings(MODE="off")
#: More requests than any policy below admits.
MANY = 5


@pytest.fixture
def silent(redis_client: Any) -> Iterator[None]:
    """The test sends Redis no command at all."""
    before = commands_sent(redis_client)
    yield
    assert commands_sent(redis_client) == before


@pytest.fixture(params=["wsgi", "asgi"])
def get(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """A GET through the sync test client, or the async one (the async middleware chain)."""
    if request.param == "wsgi":
        return request.getfixturevalue("client").get  # type: ignore[no-any-return]
    return async_to_sync(request.getfixturevalue("async_client").get)


def assert_all_through(responses: list[Any]) -> None:
    assert [r.status_code for r in responses] == [200] * MANY
    for response in responses:
        assert "RateLimit" not in response
        assert "RateLimit-Policy" not in response


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("sync", "/sync/"),
        ("async", "/async/"),
        ("decorated", "/decorated/sync/"),
        ("decorated", "/decorated/async/"),
        ("decorated", "/decorated/class/"),
        ("api:items", "/api/items/"),
    ],
    ids=["middleware-sync-view", "middleware-async-view", "decorator", "async-decorator",
         "decorated-class", "drf"],
)  # fmt: skip
@override_settings(RATELIMITS=OFF)
def test_off_lets_every_request_through_without_redis(get, silent, endpoint, url):
    create_policy("p", endpoint, limit=1)
    assert_all_through([get(url) for _ in range(MANY)])


@pytest.mark.urls("tests.contrib.ninja.urls")
@pytest.mark.parametrize("url", ["/ninja-test/plain", "/ninja-test/async"])
@override_settings(RATELIMITS=OFF)
def test_off_lets_ninja_operations_through_without_redis(get, silent, url):
    create_policy("p", "*", limit=1)
    assert_all_through([get(url) for _ in range(MANY)])


@override_settings(RATELIMITS=OFF)
def test_off_the_sign_in_backend_is_as_if_absent(silent):
    create_policy("sign-in", "*", limit=1, key="username", counts="sign_in_failures")
    request = RequestFactory().post("/accounts/login/")
    backend = RateLimitBackend()
    for _ in range(MANY):
        assert backend.authenticate(request, username="victim", password="guess") is None
        assert async_to_sync(backend.aauthenticate)(request, username="victim") is None


@pytest.mark.urls("tests.security.auth_urls")
def test_off_a_sign_in_past_the_limit_succeeds(client, mallory, silent):
    create_policy("sign-in", "*", limit=1, key="username", counts="sign_in_failures")
    wrong = {"username": "mallory", "password": "wrong"}
    right = {"username": "mallory", "password": "right-password"}
    with limits_off():
        assert [client.post("/accounts/login/", wrong).status_code for _ in range(MANY)] == [
            200
        ] * MANY
        assert client.post("/accounts/login/", right).status_code == 302


@pytest.mark.urls("project.urls")
@override_settings(RATELIMITS=OFF)
def test_off_the_usage_endpoint_says_so(client, silent):
    create_policy("p", "*", limit=10, key="ip")
    response = client.get("/ratelimits/usage/")
    assert response.status_code == 200
    assert response.json() == {"mode": "off", "policies": []}
    assert "RateLimit" not in response


def test_limits_off_as_a_context_manager_then_limits_again(client):
    create_policy("p", "sync", limit=1)
    with limits_off():
        assert_all_through([client.get("/sync/") for _ in range(MANY)])
    assert [client.get("/sync/").status_code for _ in range(2)] == [200, 429]


@limits_off()
def test_limits_off_as_a_decorator(client, silent):
    create_policy("p", "sync", limit=1)
    assert_all_through([client.get("/sync/") for _ in range(MANY)])


def test_limits_off_decorates_a_coroutine_function(async_client, silent):
    create_policy("p", "async", limit=1)

    @limits_off()
    async def requests() -> list[Any]:
        return [await async_client.get("/async/") for _ in range(MANY)]

    assert_all_through(async_to_sync(requests)())


def test_limits_off_keeps_the_other_settings(settings):
    settings.RATELIMITS = ratelimits_settings(KEY_PREFIX="other", MAX_COST=7)
    with limits_off():
        from django.conf import settings as live

        assert live.RATELIMITS["MODE"] == "off"
        assert live.RATELIMITS["KEY_PREFIX"] == "other"
        assert live.RATELIMITS["MAX_COST"] == 7
    assert "MODE" not in live.RATELIMITS
