"""Red team: wrong credentials through DRF's and django-ninja's authentication count.

Both frameworks authenticate before their throttles run, so a ``counts = failures``
policy decided by the throttle never saw a 401: a DRF view with Basic authentication and
an ip policy of limit 5 answered 8 wrong passwords from one address with eight 401s. Now
``RateLimitMiddleware`` decides the failures policies of such a view before the
framework authenticates: each wrong credential spends a unit, and the attempt over the
limit gets a 429 before any credential is checked. Against the real Redis.
"""

from __future__ import annotations

import base64
import threading

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client
from rest_framework.authtoken.models import Token

from tests.helpers import create_policy, statuses

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.auth_urls")]


def basic(username: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}"}


def test_wrong_basic_passwords_are_counted_and_then_refused_before_checking(client, mallory):
    create_policy("api-failures", "/*", limit=5, key="ip", counts="failures")
    wrong = basic("mallory", "guess")
    assert statuses(client, "/basic/", 8, **wrong) == [401] * 5 + [429] * 3
    # Over the limit, even the right password is not checked: the client is refused.
    assert client.get("/basic/", **basic("mallory", "right-password")).status_code == 429


def test_a_right_password_does_not_count(client, mallory):
    create_policy("api-failures", "/*", limit=2, key="ip", counts="failures")
    assert statuses(client, "/basic/", 5, **basic("mallory", "right-password")) == [200] * 5
    assert statuses(client, "/basic/", 3, **basic("mallory", "guess")) == [401, 401, 429]


def test_wrong_tokens_are_counted(client, mallory):
    Token.objects.create(user=mallory)
    create_policy("api-failures", "/*", limit=3, key="ip", counts="failures")
    wrong = {"HTTP_AUTHORIZATION": "Token 0123456789abcdef0123456789abcdef01234567"}
    assert statuses(client, "/token/", 5, **wrong) == [401] * 3 + [429] * 2


def test_wrong_api_keys_raising_authentication_failed_are_counted(client):
    create_policy("api-failures", "api-key", limit=3, key="ip", counts="failures")
    assert statuses(client, "/api-key/", 5, HTTP_X_API_KEY="guess") == [403] * 3 + [429] * 2
    # Another address has its own count.
    other = statuses(client, "/api-key/", 1, HTTP_X_API_KEY="guess", REMOTE_ADDR="192.0.2.9")
    assert other == [403]


def test_wrong_ninja_api_keys_are_counted(client):
    create_policy("api-failures", "ninja-auth:ninja_keyed", limit=3, key="ip", counts="failures")
    assert statuses(client, "/ninja/keyed", 5, HTTP_X_API_KEY="guess") == [401] * 3 + [429] * 2
    assert statuses(client, "/ninja/keyed", 1, HTTP_X_API_KEY="key-one") == [429]


def test_wrong_ninja_api_keys_are_counted_on_the_event_loop():
    """Under ASGI the middleware decides before django-ninja's authentication too."""
    create_policy("api-failures", "/ninja/*", limit=2, key="ip", counts="failures")
    client = AsyncClient()

    async def statuses_async(n: int, key: str) -> list[int]:
        found = []
        for _ in range(n):
            response = await client.get("/ninja/keyed-async", HTTP_X_API_KEY=key)
            found.append(response.status_code)
        return found

    assert async_to_sync(statuses_async)(4, "guess") == [401, 401, 429, 429]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("patient_redis")
def test_parallel_wrong_passwords_spend_exactly_the_limit(mallory):
    """16 threads, one address, wrong Basic passwords at limit 4: exactly 4 reach DRF's
    authentication (401), every other is refused before it (429)."""
    create_policy("api-failures", "/*", limit=4, key="ip", counts="failures")
    results: list[int] = []
    start = threading.Barrier(16)

    def guess() -> None:
        client = Client()
        start.wait()
        results.append(client.get("/basic/", **basic("mallory", "guess")).status_code)

    threads = [threading.Thread(target=guess) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results) == [401] * 4 + [429] * 12
