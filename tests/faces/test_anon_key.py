"""The ``anon`` key, DRF's ``AnonRateThrottle`` as a policy: a request without a user is
counted by its address, one with a user is not counted at all (no key, no denial), in
every face: DRF's throttle, the middleware on a sync and an async view, django-ninja's
throttle, the usage endpoint. Through the test clients and the real Redis."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import AsyncClient, Client
from rest_framework.authtoken.models import Token

from ratelimits.models import PolicyOverride
from tests.helpers import create_policy, logged_in, statuses

pytestmark = pytest.mark.django_db

ANONYMOUS = "ip:127.0.0.1"


def identities(redis_client: Any) -> set[str]:
    """The identities (hash tags) of every limiter key in Redis."""
    return {key.decode().split("{")[1].split("}")[0] for key in redis_client.keys("rl:{*")}


def basic(name: str) -> dict[str, str]:
    """HTTP Basic credentials for ``name`` (password ``pw``): DRF authenticates them,
    Django's middleware never sees a user."""
    token = base64.b64encode(f"{name}:pw".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}"}


@pytest.mark.urls("tests.faces.urls")
def test_drf_throttle_counts_anonymous_requests_and_never_a_drf_user(client, redis_client):
    create_policy("items", "api:items", limit=2, key="anon")
    User.objects.create_user("ann", password="pw")
    assert statuses(client, "/api/items/", 3) == [200, 200, 429]
    # Past the anonymous limit, from the same address: DRF's user is not counted.
    assert statuses(client, "/api/items/", 4, **basic("ann")) == [200] * 4
    assert identities(redis_client) == {ANONYMOUS}


@pytest.mark.urls("tests.faces.urls")
def test_drf_throttle_leaves_a_session_user_out(client, alice, redis_client):
    create_policy("items", "api:items", limit=2, key="anon")
    signed_in = logged_in(alice)
    assert statuses(signed_in, "/api/items/", 4) == [200] * 4
    assert identities(redis_client) == set()
    assert statuses(client, "/api/items/", 3) == [200, 200, 429]


def sync_get(client: Client) -> Callable[[str], int]:
    return lambda path: client.get(path).status_code


def async_get(client: AsyncClient) -> Callable[[str], int]:
    return lambda path: async_to_sync(client.get)(path).status_code


@pytest.mark.urls("tests.faces.urls")
@pytest.mark.parametrize(
    ("path", "kind"),
    [("/sync/", sync_get), ("/whoami/", async_get), ("/async/", async_get)],
    ids=["sync view", "async view (auser)", "async view"],
)
def test_middleware_counts_anonymous_requests_and_never_a_session_user(
    alice, redis_client, path, kind
):
    """Under the ASGI handler the middleware decides on the event loop: the session user
    is loaded there (``request.auser()``) before the policy asks for it."""
    create_policy("anon", path, limit=2, key="anon")
    maker = Client if kind is sync_get else AsyncClient
    anonymous, signed_in = maker(), maker()
    signed_in.force_login(alice)
    get_anonymous, get_signed_in = kind(anonymous), kind(signed_in)
    assert [get_signed_in(path) for _ in range(4)] == [200] * 4
    assert identities(redis_client) == set()  # no key written for her
    assert [get_anonymous(path) for _ in range(3)] == [200, 200, 429]
    assert [get_signed_in(path) for _ in range(2)] == [200, 200]
    assert identities(redis_client) == {ANONYMOUS}


@pytest.mark.urls("tests.faces.urls")
def test_an_override_names_the_anonymous_address(client, alice, redis_client):
    policy = create_policy("items", "api:items", limit=1, key="anon")
    PolicyOverride.objects.create(policy=policy, identity="127.0.0.1", limit=3)
    assert statuses(client, "/api/items/", 4) == [200, 200, 200, 429]
    assert statuses(client, "/api/items/", 2, REMOTE_ADDR="192.0.2.1") == [200, 429]
    assert statuses(logged_in(alice), "/api/items/", 2) == [200, 200]


# --- API clients that are not users: counted by address, as DRF's AnonRateThrottle does --


@pytest.mark.urls("tests.faces.api_clients_urls")
def test_an_api_client_without_a_user_is_counted_by_address(client, redis_client):
    """django-ninja's key string and a DRF authentication's ``(None, key)`` have no user:
    they share the address's counter with the anonymous requests from it."""
    create_policy("anon", "/*", limit=3, key="anon")
    assert statuses(client, "/clients/open", 1) == [200]
    assert statuses(client, "/clients/keyed", 1, HTTP_X_API_KEY="key-one") == [200]
    assert statuses(client, "/drf/key/", 2, HTTP_X_API_KEY="key-two") == [200, 429]
    assert statuses(client, "/clients/keyed", 1, HTTP_X_API_KEY="key-one") == [429]
    assert identities(redis_client) == {ANONYMOUS}


@pytest.mark.urls("tests.faces.api_clients_urls")
def test_an_api_key_or_token_of_a_user_is_not_counted(client, alice, redis_client):
    create_policy("anon", "/*", limit=1, key="anon")
    token = Token.objects.create(user=alice)
    as_token = {"HTTP_AUTHORIZATION": f"Token {token.key}"}
    assert statuses(client, "/drf/token/", 3, **as_token) == [200] * 3
    assert statuses(client, "/clients/user-key", 3, HTTP_X_API_KEY="user:alice") == [200] * 3
    assert identities(redis_client) == set()


# --- the usage endpoint -------------------------------------------------------------------


@pytest.mark.urls("tests.faces.usage_urls")
def test_usage_lists_an_anon_policy_for_anonymous_clients_only(client, alice):
    create_policy("anon", "spend", limit=2, key="anon")
    assert statuses(client, "/spend/", 1) == [200]
    (entry,) = client.get("/ratelimits/usage/").json()["policies"]
    assert (entry["name"], entry["key"], entry["used"], entry["counted_as"]) == (
        "anon",
        "anon",
        1,
        "ip",
    )
    assert logged_in(alice).get("/ratelimits/usage/").json()["policies"] == []
