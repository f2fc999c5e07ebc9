"""An API client counts as its authentication, in every face: django-ninja's
``request.auth`` (an API key string, or the user a key belongs to), DRF's token (its
user) and a DRF authentication that returns an API key instead of a user. Replays the
API-key scenarios of django-ninja's own throttling tests (``AuthRateThrottle``) against
the policies, through the Django test client and the real Redis."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient
from rest_framework.authtoken.models import Token

from ratelimits.engine.keys.identity import principal_identity
from ratelimits.models import PolicyOverride
from tests.helpers import create_policy, statuses

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.api_clients_urls")]

NINJA_429 = {"detail": "Too many requests."}


def identities(redis_client: Any) -> set[str]:
    """The identities (hash tags) of every limiter key in Redis."""
    return {key.decode().split("{")[1].split("}")[0] for key in redis_client.keys("rl:{*")}


# --- django-ninja: APIKeyHeader --------------------------------------------------------------


@pytest.mark.parametrize("key_kind", ["user", "user_or_ip"])
def test_two_api_keys_from_one_address_have_separate_counters(client, redis_client, key_kind):
    create_policy("keyed", "clients:keyed", limit=2, key=key_kind)
    assert statuses(client, "/clients/keyed", 3, HTTP_X_API_KEY="key-one") == [200, 200, 429]
    assert statuses(client, "/clients/keyed", 3, HTTP_X_API_KEY="key-two") == [200, 200, 429]
    assert identities(redis_client) == {
        principal_identity("key-one"),
        principal_identity("key-two"),
    }


def test_the_key_itself_is_never_in_a_redis_key(client, redis_client):
    create_policy("keyed", "clients:keyed", limit=2, key="user")
    statuses(client, "/clients/keyed", 1, HTTP_X_API_KEY="key-one")
    assert not any(b"key-one" in key for key in redis_client.keys("*"))


def test_a_user_policy_counts_api_clients_and_never_anonymous_ones(client, redis_client):
    """key = user: API keys are limited (ninja's AuthRateThrottle counted them too); an
    operation without authentication is not counted by a user policy."""
    create_policy("users", "/clients/*", limit=1, key="user")
    assert statuses(client, "/clients/keyed", 2, HTTP_X_API_KEY="key-one") == [200, 429]
    assert statuses(client, "/clients/open", 3) == [200, 200, 200]
    assert identities(redis_client) == {principal_identity("key-one")}


def test_under_user_or_ip_an_api_key_never_shares_the_anonymous_address_counter(
    client, redis_client
):
    """An anonymous client at 127.0.0.1 uses the limit up; API keys from the same address
    are still admitted, each on its own counter."""
    create_policy("all", "/clients/*", limit=2, key="user_or_ip")
    assert statuses(client, "/clients/open", 3) == [200, 200, 429]
    assert statuses(client, "/clients/keyed", 1, HTTP_X_API_KEY="key-one") == [200]
    assert statuses(client, "/clients/keyed", 1, HTTP_X_API_KEY="key-two") == [200]
    assert identities(redis_client) == {
        "ip:127.0.0.1",
        principal_identity("key-one"),
        principal_identity("key-two"),
    }


def test_a_key_that_belongs_to_a_user_counts_as_that_user(client, alice, redis_client):
    """A ninja auth that returns a user: the client is that user, so a user override
    applies and the session of the same user shares the counter."""
    policy = create_policy("users", "/clients/*", limit=1, key="user")
    PolicyOverride.objects.create(policy=policy, user=alice, limit=3)
    as_alice = {"HTTP_X_API_KEY": "user:alice"}
    assert statuses(client, "/clients/user-key", 4, **as_alice) == [200, 200, 200, 429]
    assert identities(redis_client) == {f"u:{alice.pk}"}
    client.force_login(alice)
    assert statuses(client, "/clients/open", 1) == [429]  # the same user, the same count


def test_an_override_names_an_api_client(client, redis_client):
    policy = create_policy("keyed", "clients:keyed", limit=1, key="user_or_ip")
    PolicyOverride.objects.create(policy=policy, identity="auth:key-one", limit=3)
    stored = PolicyOverride.objects.get().identity
    assert stored == principal_identity("key-one")  # hashed, never the key
    assert statuses(client, "/clients/keyed", 4, HTTP_X_API_KEY="key-one") == [200, 200, 200, 429]
    assert statuses(client, "/clients/keyed", 2, HTTP_X_API_KEY="key-two") == [200, 429]


def test_an_exempt_override_for_an_api_client(client):
    policy = create_policy("keyed", "clients:keyed", limit=1, key="user")
    PolicyOverride.objects.create(policy=policy, identity="auth:key-two", exempt=True)
    assert statuses(client, "/clients/keyed", 3, HTTP_X_API_KEY="key-two") == [200, 200, 200]
    assert statuses(client, "/clients/keyed", 2, HTTP_X_API_KEY="key-one") == [200, 429]


@pytest.mark.django_db(transaction=True)  # the throttle's thread reads committed rows only
def test_an_async_operation_counts_each_api_key(redis_client):
    create_policy("keyed", "clients:keyed_async", limit=1, key="user")

    async def run() -> list[tuple[int, Any]]:
        client = AsyncClient()
        replies = []
        for key in ("key-one", "key-one", "key-two"):
            response = await client.get("/clients/keyed-async", headers={"X-API-Key": key})
            replies.append((response.status_code, json.loads(response.content)))
        return replies

    replies = async_to_sync(run)()
    assert [status for status, _ in replies] == [200, 429, 200]
    assert replies[1][1] == NINJA_429
    assert identities(redis_client) == {
        principal_identity("key-one"),
        principal_identity("key-two"),
    }


# --- DRF ---------------------------------------------------------------------------------


def test_drf_tokens_count_as_their_users(client, alice, redis_client):
    from django.contrib.auth.models import User

    bob = User.objects.create_user("bob")
    create_policy("tokens", "drf-token", limit=2, key="user")
    tokens = {user: Token.objects.create(user=user).key for user in (alice, bob)}
    for user in (alice, bob):
        auth = {"HTTP_AUTHORIZATION": f"Token {tokens[user]}"}
        assert statuses(client, "/drf/token/", 3, **auth) == [200, 200, 429]
    assert identities(redis_client) == {f"u:{alice.pk}", f"u:{bob.pk}"}
    assert not any(
        token.encode() in key for token in tokens.values() for key in redis_client.keys("*")
    )


@pytest.mark.parametrize("key_kind", ["user", "user_or_ip"])
def test_drf_api_keys_from_one_address_have_separate_counters(client, redis_client, key_kind):
    """A DRF authentication that returns ``(None, key)``: the key is the principal."""
    create_policy("keys", "drf-key", limit=1, key=key_kind)
    assert statuses(client, "/drf/key/", 2, HTTP_X_API_KEY="key-one") == [200, 429]
    assert statuses(client, "/drf/key/", 2, HTTP_X_API_KEY="key-two") == [200, 429]
    assert identities(redis_client) == {
        principal_identity("key-one"),
        principal_identity("key-two"),
    }
