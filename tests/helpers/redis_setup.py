"""The settings that point the limiter at a Redis server, and a Sentinel pair to point it at."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from django.conf import settings
from redis.sentinel import MasterNotFoundError, Sentinel

from ratelimits.testutils import RedisSentinel, RedisServer


def ratelimits_settings(**values: Any) -> dict[str, Any]:
    """The test settings' ``RATELIMITS`` with ``values`` changed."""
    return {**settings.RATELIMITS, **values}


def caches_at(port: int) -> dict[str, Any]:
    """``CACHES`` with the default cache (the limiter's Redis) on ``port`` of 127.0.0.1."""
    location = f"redis://127.0.0.1:{port}/0"
    return {"default": {**settings.CACHES["default"], "LOCATION": location}}


@contextmanager
def sentinel_servers(
    django_settings: Any,
) -> Iterator[tuple[RedisServer, RedisServer, RedisSentinel]]:
    """A primary, its replica and one sentinel on 127.0.0.1, and the default cache (the
    limiter's Redis) on the primary through the sentinel, with django-redis's
    ``SentinelClient``; ``django_settings`` is pytest-django's ``settings`` fixture.
    Yields ``(primary, replica, sentinel)``."""
    with RedisServer() as primary:
        replica_of = ("--replicaof", "127.0.0.1", str(primary.port))
        # A service name of its own: django-redis keeps pools by URL for the process.
        service = f"service{primary.port}"
        with (
            RedisServer(extra=replica_of) as replica,
            RedisSentinel(primary, service) as sentinel,
        ):
            deadline = time.monotonic() + 10
            while not _sentinel_ready(sentinel):
                assert time.monotonic() < deadline, "the sentinel never saw a healthy pair"
                time.sleep(0.1)
            through_sentinels(django_settings, service, [sentinel])
            yield primary, replica, sentinel


def through_sentinels(django_settings: Any, service: str, sentinels: list[RedisSentinel]) -> None:
    """Point the default cache (the limiter's Redis) at the primary of ``service``, asking
    ``sentinels`` in that order, with django-redis's ``SentinelClient``."""
    caches = copy.deepcopy(django_settings.CACHES)
    caches["default"] = {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": f"redis://{service}/0",
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.SentinelClient",
            "SENTINELS": [("127.0.0.1", sentinel.port) for sentinel in sentinels],
            "SOCKET_TIMEOUT": 1,
        },
    }
    # CACHES first: changing it closes the caches, which django-redis 5.4 does by making
    # their clients, with whatever connection factory is set by then.
    django_settings.CACHES = caches
    django_settings.DJANGO_REDIS_CONNECTION_FACTORY = "django_redis.pool.SentinelConnectionFactory"


def sentinel_failover(
    primary: RedisServer, replica: RedisServer, sentinel: RedisSentinel, timeout: float = 20.0
) -> None:
    """Make ``replica`` the primary, and wait until the old ``primary`` is demoted: from
    then on a write there is READONLY, and a client still on it must move."""
    deadline = time.monotonic() + timeout
    sentinel_switch(replica, sentinel, timeout)
    # Until the sentinel demotes the old primary, it still takes writes (Sentinel's own
    # window).
    while primary.client().info("replication")["role"] != "slave":
        assert time.monotonic() < deadline, "the old primary was never demoted"
        time.sleep(0.1)


def sentinel_switch(replica: RedisServer, sentinel: RedisSentinel, timeout: float = 30.0) -> None:
    """An operator's ``SENTINEL FAILOVER``, once the sentinel accepts it; returns as soon
    as the sentinel names ``replica`` the primary (the old one is not demoted yet)."""
    deadline = time.monotonic() + timeout
    while True:  # the sentinel refuses (NOGOODSLAVE) until it has vetted the replica
        try:
            sentinel.client().sentinel_failover(sentinel.service)
            break
        except redis.ResponseError:
            assert time.monotonic() < deadline, "the sentinel never accepted a failover"
            time.sleep(0.2)
    while sentinel.client().sentinel_get_master_addr_by_name(sentinel.service)[1] != replica.port:
        assert time.monotonic() < deadline, "the failover did not happen"
        time.sleep(0.05)


def _sentinel_ready(sentinel: RedisSentinel) -> bool:
    """The sentinel sees the primary up (what redis-py's discovery needs) and the replica."""
    try:
        Sentinel([("127.0.0.1", sentinel.port)]).discover_master(sentinel.service)
    except MasterNotFoundError:
        return False
    replicas = sentinel.client().sentinel_slaves(sentinel.service)
    return any(r["flags"] == "slave" and r["master-link-status"] == "ok" for r in replicas)
