"""The limiter behind Redis Sentinel, through django-redis's SentinelClient: a primary, a
replica and one sentinel, all started here on 127.0.0.1; then a failover."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync, sync_to_async
from redis.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool

from ratelimits.engine.store import connection
from ratelimits.models import Policy
from ratelimits.testutils import RedisSentinel, RedisServer
from tests.helpers import item_statuses

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def sentinel_site(settings: Any) -> Iterator[tuple[RedisServer, RedisServer, RedisSentinel]]:
    with RedisServer() as primary:
        replica_of = ("--replicaof", "127.0.0.1", str(primary.port))
        # A service name of its own: django-redis keeps pools by URL for the process.
        service = f"service{primary.port}"
        with (
            RedisServer(extra=replica_of) as replica,
            RedisSentinel(primary, service) as sentinel,
        ):
            deadline = time.monotonic() + 10
            while not _ready(sentinel):
                assert time.monotonic() < deadline, "the sentinel never saw a healthy pair"
                time.sleep(0.1)
            caches = copy.deepcopy(settings.CACHES)
            caches["default"] = {
                "BACKEND": "django_redis.cache.RedisCache",
                "LOCATION": f"redis://{service}/0",
                "OPTIONS": {
                    "CLIENT_CLASS": "django_redis.client.SentinelClient",
                    "SENTINELS": [("127.0.0.1", sentinel.port)],
                    "SOCKET_TIMEOUT": 1,
                },
            }
            settings.DJANGO_REDIS_CONNECTION_FACTORY = "django_redis.pool.SentinelConnectionFactory"
            settings.CACHES = caches
            yield primary, replica, sentinel


def _ready(sentinel: RedisSentinel) -> bool:
    """The sentinel sees the primary up (what redis-py's discovery needs) and the replica."""
    try:
        Sentinel([("127.0.0.1", sentinel.port)]).discover_master(sentinel.service)
    except MasterNotFoundError:
        return False
    replicas = sentinel.client().sentinel_slaves(sentinel.service)
    return any(r["flags"] == "slave" and r["master-link-status"] == "ok" for r in replicas)


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


def fail_over(primary: RedisServer, replica: RedisServer, sentinel: RedisSentinel) -> None:
    """Make the sentinel promote ``replica``, and wait until ``primary`` is demoted."""
    deadline = time.monotonic() + 20
    while True:  # the sentinel refuses (NOGOODSLAVE) until it has vetted the replica
        try:
            sentinel.client().sentinel_failover(sentinel.service)
            break
        except redis.ResponseError:
            assert time.monotonic() < deadline, "the sentinel never accepted a failover"
            time.sleep(0.2)
    while sentinel.client().sentinel_get_master_addr_by_name(sentinel.service)[1] != replica.port:
        assert time.monotonic() < deadline, "the failover did not happen"
        time.sleep(0.1)
    # Until the sentinel demotes the old primary, it still takes writes (Sentinel's own
    # window); from then on a write there is READONLY, and the client must move.
    while primary.client().info("replication")["role"] != "slave":
        assert time.monotonic() < deadline, "the old primary was never demoted"
        time.sleep(0.1)


def test_after_a_failover_limiting_continues_on_the_new_primary(client, sentinel_site):
    primary, replica, sentinel = sentinel_site
    Policy.objects.create(
        name="items", endpoint="api:items", algorithm="sliding_log", limit=2, window=60, key="ip"
    )
    assert item_statuses(client, "203.0.113.7", 3) == [200, 200, 429]
    fail_over(primary, replica, sentinel)
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


def test_the_async_path_follows_the_failover_on_held_connections(async_client, sentinel_site):
    """An async view under RateLimitMiddleware, all requests on one event loop: its held
    connections to the old primary are given up, and the new primary looked up."""
    primary, replica, sentinel = sentinel_site
    Policy.objects.create(
        name="hello",
        endpoint="hello",
        algorithm="sliding_log",
        limit=2,
        window=60,
        key="header:X-Client",  # the ASGI test client's address is always 127.0.0.1
    )

    async def statuses(who: str) -> list[int]:
        headers = {"X-Client": who}
        return [(await async_client.get("/hello/", headers=headers)).status_code for _ in "abc"]

    async def scenario() -> list[int]:
        assert await statuses("before") == [200, 200, 429]
        await sync_to_async(fail_over)(primary, replica, sentinel)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            seen = await statuses("after")
            if seen == [200, 200, 429]:
                return seen
            await async_client.get("/hello/", headers={"X-Client": "traffic"})
            await asyncio.sleep(0.1)
        return seen

    assert async_to_sync(scenario)() == [200, 200, 429]
    assert [key for key in replica.client().scan_iter("rl:*:hello:log")]
