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

_lock = threading.Lock()
_client: redis.Redis | None = None


def get_client() -> redis.Redis:
    """The process's limiter client (created on first use, shared by threads)."""
    global _client
    if _client is None:
        with _lock:
            if _client is None:
                _client = _create_client()
    return _client


def reset() -> None:
    """Forget the client (settings changed); the next call builds a new one."""
    global _client
    with _lock:
        old, _client = _client, None
    if old is not None:
        old.connection_pool.disconnect()


def _create_client() -> redis.Redis:
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
    timeout = float(app_settings.SOCKET_TIMEOUT)
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
