"""A site whose cache is django-valkey (a valkey-py client): the limiter copies the
cache's settings into a redis-py pool of its own, exactly as it does for django-redis,
on one server and behind Sentinel, sync and async; the check accepts that cache and says
what to use instead of django-valkey's async and cluster caches."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync
from django.test import AsyncClient, override_settings
from redis.sentinel import SentinelConnectionPool

from ratelimits.checks.installation import check_cache
from ratelimits.engine.store import connection
from ratelimits.models import Policy
from ratelimits.testutils import RedisServer
from tests.helpers import item_statuses, ratelimits_settings, sentinel_servers

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.urls")]

VALKEY_CACHE = "django_valkey.cache.ValkeyCache"


def valkey_cache(location: str, **options: Any) -> dict[str, Any]:
    return {
        "BACKEND": VALKEY_CACHE,
        "LOCATION": location,
        "OPTIONS": {"SOCKET_TIMEOUT": 1, **options},
    }


@pytest.fixture
def items_policy() -> None:
    Policy.objects.create(
        name="items", endpoint="api:items", algorithm="sliding_log", limit=2, window=60, key="ip"
    )
    for name, endpoint in (("sync", "sync"), ("async", "async")):
        Policy.objects.create(
            name=name, endpoint=endpoint, algorithm="fixed_window", limit=2, window=60, key="ip"
        )


@pytest.fixture
def valkey_site(settings: Any, redis_server: RedisServer, items_policy: None) -> RedisServer:
    """The default cache, the limiter's Redis, made by django-valkey."""
    caches = copy.deepcopy(settings.CACHES)
    caches["default"] = valkey_cache(f"redis://127.0.0.1:{redis_server.port}/0")
    settings.CACHES = caches
    return redis_server


def test_the_limiter_counts_through_a_django_valkey_cache_with_its_own_pool(client, valkey_site):
    pool = connection.get_client().connection_pool
    assert type(pool) is redis.ConnectionPool  # redis-py's, made from valkey-py's settings
    assert pool.connection_kwargs["port"] == valkey_site.port
    assert pool.connection_kwargs["socket_timeout"] == 0.1  # the limiter's, not the cache's 1 s
    assert item_statuses(client, "203.0.113.7", 3) == [200, 200, 429]
    assert valkey_site.client().exists("rl:{ip:203.0.113.7}:items:log")


def test_an_async_view_is_limited_through_a_django_valkey_cache(valkey_site):
    async def statuses() -> list[int]:
        asgi = AsyncClient()
        return [(await asgi.get("/async/")).status_code for _ in range(3)]

    assert async_to_sync(statuses)() == [200, 200, 429]
    assert valkey_site.client().exists("rl:{ip:127.0.0.1}:async:fixed")


def test_credentials_and_database_are_carried_over(settings, items_policy, client):
    with RedisServer() as server:
        server.client().config_set("requirepass", "s3cret")
        caches = copy.deepcopy(settings.CACHES)
        caches["default"] = valkey_cache(f"redis://:s3cret@127.0.0.1:{server.port}/3")
        settings.CACHES = caches
        assert item_statuses(client, "203.0.113.9", 3) == [200, 200, 429]
        assert redis.Redis(port=server.port, password="s3cret", db=3).exists(
            "rl:{ip:203.0.113.9}:items:log"
        )


def test_a_dead_django_valkey_cache_is_the_fail_mode_not_a_500(settings, items_policy, client):
    """Errors come from redis-py's pool, so the breaker and the fail mode know them."""
    with RedisServer() as server:
        port = server.port
    caches = copy.deepcopy(settings.CACHES)
    caches["default"] = valkey_cache(f"redis://127.0.0.1:{port}/0")
    settings.CACHES = caches
    settings.RATELIMITS = ratelimits_settings(SOCKET_TIMEOUT=0.2)
    Policy.objects.filter(name="items").update(fail_open=False)
    Policy.objects.filter(name="sync").update(fail_open=True)
    assert item_statuses(client, "203.0.113.10", 2) == [429, 429]  # fail closed
    assert [client.get("/sync/").status_code for _ in range(2)] == [200, 200]


@pytest.mark.slow
def test_the_limiter_follows_a_django_valkey_sentinel_cache(settings, items_policy, client):
    with sentinel_servers(settings) as (primary, _, sentinel):
        caches = copy.deepcopy(settings.CACHES)
        caches["default"] = valkey_cache(
            f"redis://{sentinel.service}/0",
            CLIENT_CLASS="django_valkey.client.SentinelClient",
            SENTINELS=[("127.0.0.1", sentinel.port)],
        )
        settings.DJANGO_VALKEY_CONNECTION_FACTORY = "django_valkey.pool.SentinelConnectionFactory"
        settings.CACHES = caches
        pool = connection.get_client().connection_pool
        assert isinstance(pool, SentinelConnectionPool)  # redis-py's
        assert pool.is_master  # the primary, though this release's cache pool asks for a replica
        assert isinstance(pool.sentinel_manager, redis.sentinel.Sentinel)
        assert pool.service_name == sentinel.service
        assert item_statuses(client, "203.0.113.11", 3) == [200, 200, 429]
        assert primary.client().exists("rl:{ip:203.0.113.11}:items:log")


def test_the_check_accepts_django_valkey(settings):
    caches = {**settings.CACHES, "valkey": valkey_cache("redis://127.0.0.1:1/0")}
    with override_settings(CACHES=caches, RATELIMITS=ratelimits_settings(CACHE="valkey")):
        assert check_cache() == []


@pytest.mark.parametrize(
    ("backend", "hint"),
    [
        ("django_valkey.async_cache.cache.AsyncValkeyCache", VALKEY_CACHE),
        ("django_valkey.cluster_cache.cache.ClusterValkeyCache", "CLUSTER_NODES"),
        ("django.core.cache.backends.redis.RedisCache", "django_redis.cache.RedisCache"),
    ],
)
def test_the_check_says_what_to_use_instead(settings, backend, hint):
    caches = {**settings.CACHES, "other": {"BACKEND": backend, "LOCATION": "redis://x:1/0"}}
    with override_settings(CACHES=caches, RATELIMITS=ratelimits_settings(CACHE="other")):
        (message,) = check_cache()
    assert message.id == "ratelimits.E004"
    assert backend in message.msg
    assert hint in (message.hint or "")
