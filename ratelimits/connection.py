"""The limiter's Redis client, derived from a django-redis cache alias.

The limiter keeps its own connection pool, built from the cache's connection settings
but with the short ``SOCKET_TIMEOUT`` and no retries, so a slow or dead Redis costs
one short timeout and then the policy's fail mode, never a hung worker. The cache's
own pool (often with longer timeouts) is left alone.
"""

from __future__ import annotations

import threading
from typing import Any

import redis
from django.core.cache import caches
from redis.backoff import NoBackoff
from redis.retry import Retry

from ratelimits.conf import app_settings
from ratelimits.exceptions import ConfigurationError

#: Seconds the management command and the admin wait for Redis: they scan and inspect,
#: so they may wait longer than a request does.
TOOL_SOCKET_TIMEOUT = 5.0

_lock = threading.Lock()
_clients: dict[str, redis.Redis] = {}


def get_client() -> redis.Redis:
    """The process's limiter client (created on first use, shared by threads)."""
    client = _clients.get("limiter")
    if client is None:
        client = _get_or_create("limiter", float(app_settings.SOCKET_TIMEOUT))
    return client


def get_tool_client() -> redis.Redis:
    """A client for inspecting and resetting keys: same server, ``TOOL_SOCKET_TIMEOUT``."""
    client = _clients.get("tool")
    if client is None:
        client = _get_or_create("tool", TOOL_SOCKET_TIMEOUT)
    return client


def describe(client: redis.Redis) -> str:
    """Where ``client`` connects, for error messages (never the password)."""
    kwargs = client.connection_pool.connection_kwargs
    if kwargs.get("path"):
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


def reset() -> None:
    """Forget the clients (settings changed); the next call builds new ones."""
    with _lock:
        old = list(_clients.values())
        _clients.clear()
    for client in old:
        client.connection_pool.disconnect()


def _get_or_create(purpose: str, timeout: float) -> redis.Redis:
    with _lock:
        client = _clients.get(purpose)
        if client is None:
            client = _clients[purpose] = _create_client(timeout)
        return client


def _create_client(timeout: float) -> redis.Redis:
    alias = app_settings.CACHE
    try:
        cache = caches[alias]
    except Exception as e:  # InvalidCacheBackendError and friends
        message = f"RATELIMITS['CACHE'] names the cache {alias!r}, which is not configured."
        raise ConfigurationError(message) from e
    try:
        base = cache.client.get_client(write=True)  # type: ignore[attr-defined]
    except AttributeError as e:
        message = (
            f"The cache {alias!r} is not a django-redis cache (django_redis.cache.RedisCache)."
        )
        raise ConfigurationError(message) from e
    pool = base.connection_pool
    if type(pool) not in (redis.ConnectionPool, redis.BlockingConnectionPool):
        # Sentinel or custom pools manage their own connections: use the client as is.
        return base
    kwargs: dict[str, Any] = dict(pool.connection_kwargs)
    kwargs.update(
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        retry_on_error=[],
    )
    kwargs.pop("retry_on_timeout", None)
    own_pool = redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
    return redis.Redis(connection_pool=own_pool)
