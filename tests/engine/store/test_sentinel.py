"""The limiter behind Redis Sentinel, through django-redis's SentinelClient: a primary, a
replica and one sentinel, all started here on 127.0.0.1; then a failover."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from redis.sentinel import SentinelConnectionPool

from ratelimits.engine.store import connection
from ratelimits.models import Policy
from ratelimits.testutils import RedisSentinel, RedisServer
from tests.helpers import item_statuses, sentinel_failover, sentinel_servers

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def sentinel_site(settings: Any) -> Iterator[tuple[RedisServer, RedisServer, RedisSentinel]]:
    with sentinel_servers(settings) as servers:
        yield servers


def test_the_limiter_reaches_the_primary_through_the_sentinel_with_its_own_timeout(
    client, sentinel_site
):
    primary, _, sentinel = sentinel_site
    Policy.objects.create(
        name="items", endpoint="api:items", algorithm="sliding_log", limit=2, window=60, key="ip"
    )
    pool = connection.get_client().connection_pool
    assert isinstance(pool, SentinelConnectionPool) and pool.service_name == sentinel.service
    assert pool.connection_kwargs["socket_timeout"] == 0.1  # not the cache's 1 s
    assert item_statuses(client, "203.0.113.7", 3) == [200, 200, 429]
    assert primary.client().exists("rl:{ip:203.0.113.7}:items:log")


def test_after_a_failover_limiting_continues_on_the_new_primary(client, sentinel_site):
    primary, replica, sentinel = sentinel_site
    Policy.objects.create(
        name="items", endpoint="api:items", algorithm="sliding_log", limit=2, window=60, key="ip"
    )
    assert item_statuses(client, "203.0.113.7", 3) == [200, 200, 429]
    sentinel_failover(primary, replica, sentinel)
    seen: list[int] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        seen.extend(item_statuses(client, "198.51.100.9", 3))
        if seen[-3:] == [200, 200, 429]:
            break
        client.get("/api/items/", REMOTE_ADDR="198.51.100.10")  # traffic while it settles
        time.sleep(0.1)
        seen.clear()
    assert seen[-3:] == [200, 200, 429], seen
    assert replica.client().exists("rl:{ip:198.51.100.9}:items:log")
    assert replica.client().info("replication")["role"] == "master"
