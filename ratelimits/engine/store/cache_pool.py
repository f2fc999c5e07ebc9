"""The limiter's own connection pool, made from the pool of the cache it names.

The cache is django-redis (a redis-py client) or django-valkey (a valkey-py client, the
Valkey project's fork of redis-py). Either way the limiter copies the server's address,
credentials and TLS settings into a redis-py pool of its own, with the short
``SOCKET_TIMEOUT`` and no retries, and leaves the cache's pool alone. valkey-py's
connection and pool classes are redis-py's under other names and take the same settings,
so a valkey-py pool is read as the redis-py pool of the same name: one client library
on the request path (sync and async), whichever cache the site runs.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.sentinel
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import SentinelConnectionPool

from ratelimits.engine.store.async_connections import accepted
from ratelimits.engine.store.sentinel_lookup import newest_sentinel
from ratelimits.exceptions import ConfigurationError

#: redis-py's connection classes by name: valkey-py's keep redis-py's names.
_CONNECTIONS: dict[str, type[redis.connection.AbstractConnection]] = {
    cls.__name__: cls
    for cls in (
        redis.connection.Connection,
        redis.connection.SSLConnection,
        redis.connection.UnixDomainSocketConnection,
        redis.sentinel.SentinelManagedConnection,
        redis.sentinel.SentinelManagedSSLConnection,
    )
}

#: Pools the limiter copies; any other pool manages its own connections.
_PLAIN_POOLS = ("ConnectionPool", "BlockingConnectionPool")


def client_of(cache: Any, alias: str, timeout: float) -> redis.Redis:
    """The limiter's client for the django-redis or django-valkey cache ``cache``: a pool
    of its own with ``timeout`` and no retries, else the cache's client as it is (a custom
    pool of redis-py's that manages its own connections). Raises ``ConfigurationError``
    for any other cache."""
    try:
        base = cache.client.get_client(write=True)
    except AttributeError as e:
        message = (
            f"The cache {alias!r} is neither a django-redis cache (django_redis.cache."
            "RedisCache) nor a django-valkey one (django_valkey.cache.ValkeyCache)."
        )
        raise ConfigurationError(message) from e
    pool = base.connection_pool
    library = type(pool).__module__.partition(".")[0]
    own = _own_pool(pool, timeout, alias)
    if own is not None:
        return redis.Redis(connection_pool=own)
    if library == "redis":
        return base  # a custom redis-py pool: used as the cache made it
    raise ConfigurationError(
        f"The cache {alias!r} uses the connection pool {type(pool).__qualname__} of "
        f"{library}, which the limiter cannot copy: use the library's ConnectionPool, "
        "BlockingConnectionPool or SentinelConnectionPool."
    )


def _own_pool(pool: Any, timeout: float, alias: str) -> redis.ConnectionPool | None:
    """A redis-py pool to the server ``pool`` connects to, or ``None`` for a pool of a
    class the limiter does not know."""
    pool_class = type(pool).__name__
    if pool_class not in _PLAIN_POOLS and pool_class != "SentinelConnectionPool":
        return None
    connection_class = _redis_connection(pool.connection_class, alias)
    kwargs = _settings(pool.connection_kwargs, connection_class, timeout)
    if pool_class == "SentinelConnectionPool":
        return SentinelConnectionPool(
            pool.service_name,
            newest_sentinel(pool.sentinel_manager),
            # The limiter writes on every request: always the primary, whatever the
            # cache's pool asks for (django-valkey 0.4's SentinelClient asks for a replica).
            is_master=True,
            check_connection=pool.check_connection,
            connection_class=connection_class,
            **kwargs,
        )
    return redis.ConnectionPool(connection_class=connection_class, **kwargs)


def _redis_connection(cls: type, alias: str) -> type[redis.connection.AbstractConnection]:
    """redis-py's connection class for ``cls``: itself, or redis-py's class of the same
    name for valkey-py's."""
    if issubclass(cls, redis.connection.AbstractConnection):
        return cls
    for base in cls.__mro__:
        if base.__name__ in _CONNECTIONS:
            return _CONNECTIONS[base.__name__]
    raise ConfigurationError(
        f"The cache {alias!r} connects with {cls.__qualname__}, which is none of "
        f"{', '.join(sorted(_CONNECTIONS))}: the limiter cannot copy its settings."
    )


def _settings(kwargs: dict[str, Any], connection_class: type, timeout: float) -> dict[str, Any]:
    """The cache's connection settings, with the limiter's timeouts and no retries: only
    those ``connection_class`` takes (valkey-py may add settings redis-py lacks), and none
    whose value is one of valkey-py's objects (its reply parser: redis-py picks its own)."""
    names = accepted(connection_class)
    own = {
        name: value for name, value in kwargs.items() if name in names and not _of_valkey_py(value)
    }
    own.update(
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        retry_on_error=[],
    )
    own.pop("retry_on_timeout", None)
    own.pop("connection_pool", None)  # a Sentinel pool's back reference to itself
    return own


def _of_valkey_py(value: Any) -> bool:
    """Whether ``value`` is a class or an object of valkey-py's."""
    owner = value if isinstance(value, type) else type(value)
    return owner.__module__.partition(".")[0] == "valkey"
