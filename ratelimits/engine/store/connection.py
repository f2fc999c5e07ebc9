"""The limiter's Redis client: from a django-redis or django-valkey cache alias, or a
Redis Cluster.

The limiter keeps its own connection pool, built from the cache's connection settings
but with the short ``SOCKET_TIMEOUT`` and no retries, so a slow or dead Redis costs
one short timeout and then the policy's fail mode, never a hung worker. The cache's
own pool (often with longer timeouts) is left alone.

With ``RATELIMITS["CLUSTER_NODES"]`` set, the client is a ``redis.cluster.RedisCluster``
built from those startup nodes instead (django-redis has no cluster client), with the
same timeouts and no retries (:mod:`ratelimits.engine.store.cluster`).
Tools that work node by node (``SCAN``, pipelines of script calls) use
:func:`node_clients` and :func:`node_client`. Each node has its own circuit breaker
(the limiter's route picks it: :mod:`ratelimits.engine.store.route`), so a dead primary
costs only the requests whose keys it holds.
"""

from __future__ import annotations

import threading
import time
from typing import TypeAlias

import redis
from django.core.cache import caches
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException
from redis.sentinel import SentinelConnectionPool

from ratelimits.conf import app_settings, resets_on_setting_change
from ratelimits.engine.store import async_caller, cache_pool, caller, cluster, failover
from ratelimits.engine.store import breaker as breakers
from ratelimits.engine.store.cluster import parse_node
from ratelimits.exceptions import ConfigurationError

#: What :func:`get_client` returns: one server's client, or a cluster's.
Client: TypeAlias = "redis.Redis | RedisCluster"

#: What a Redis call can raise: redis-py's cluster errors are not all ``RedisError``\s.
REDIS_ERRORS: tuple[type[Exception], ...] = (redis.RedisError, RedisClusterException)

#: Seconds the management command and the admin wait for Redis: they scan and inspect,
#: so they may wait longer than a request does.
TOOL_SOCKET_TIMEOUT = 5.0

_lock = threading.Lock()
_clients: dict[str, Client] = {}


class Unreachable(redis.ConnectionError):
    """The limiter's client could not be made: none of a cluster's startup nodes answered
    (a node still booting when the worker starts). An outage like any other: the breaker
    opened when the try failed, each policy's fail mode applies, and the client is tried
    again once per ``BREAKER_COOLDOWN``, never per request."""


#: When the limiter's client may be tried again after a failed try, and the failure.
_unreachable: dict[str, tuple[float, str]] = {}


def get_client() -> Client:
    """The process's limiter client (created on first use, shared by threads)."""
    client = _clients.get("limiter")
    if client is None:
        client = _get_or_create("limiter", float(app_settings.SOCKET_TIMEOUT), guarded=True)
    return client


def get_tool_client() -> Client:
    """A client for inspecting and resetting keys: same server, ``TOOL_SOCKET_TIMEOUT``.

    A cluster's is made to read the cluster's layout again (``CLUSTER SLOTS``) when it
    last did more than :data:`~.cluster.TOPOLOGY_TTL` seconds ago, so a long-running
    process (the admin) sees primaries added and slots moved since: tools scan every
    primary."""
    client = _clients.get("tool")
    if client is None:
        client = _get_or_create("tool", TOOL_SOCKET_TIMEOUT)
    elif isinstance(client, RedisCluster):
        cluster.refresh_topology(client)
    return client


def new_client(timeout: float) -> Client:
    """A client of the limiter's Redis of its own, with ``timeout``, that no one else
    uses (a system check's): give it back with :func:`close`. A cluster's connects to
    the startup nodes at once, and raises when none answers."""
    return _create_client(timeout)


def close(client: Client) -> None:
    """Close the connections of a client from :func:`new_client`."""
    if isinstance(client, RedisCluster):
        client.close()
    else:
        client.connection_pool.disconnect()


def is_cluster(client: Client) -> bool:
    # The exact-type test first: isinstance() on RedisCluster (a generic class) costs
    # about half a microsecond on every request.
    return type(client) is not redis.Redis and isinstance(client, RedisCluster)


def node_clients(client: Client) -> list[redis.Redis]:
    """One client per primary: the client itself on a single server."""
    if isinstance(client, RedisCluster):
        return [client.get_redis_connection(node) for node in client.get_primaries()]
    return [client]


def node_client(client: Client, key: str) -> redis.Redis:
    """The client of the server holding ``key``: the client itself on a single server."""
    if isinstance(client, RedisCluster):
        return client.get_redis_connection(client.get_node_from_key(key))
    return client


def slot_of(client: Client, key: str) -> int:
    """The cluster hash slot of ``key``; 0 for every key on a single server."""
    if isinstance(client, RedisCluster):
        return int(client.keyslot(key))
    return 0


def where() -> str:
    """Where the limiter's Redis is, from the settings: for error messages (never
    connects, never shows the password)."""
    nodes = app_settings.CLUSTER_NODES
    if nodes:
        try:
            return "cluster nodes " + ", ".join("{}:{}".format(*parse_node(url)) for url in nodes)
        except ValueError:
            return "cluster nodes (misconfigured)"
    return describe(get_tool_client())


def describe(client: Client) -> str:
    """Where ``client`` connects, for error messages (never the password)."""
    if isinstance(client, RedisCluster):
        nodes = sorted(node.name for node in client.get_nodes()) or ["(no nodes)"]
        return "cluster nodes " + ", ".join(nodes)
    pool = client.connection_pool
    if isinstance(pool, SentinelConnectionPool):
        return f"the primary of {pool.service_name!r} (Sentinel)"
    kwargs = pool.connection_kwargs
    if kwargs.get("path"):
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


@resets_on_setting_change("RATELIMITS", "CACHES")
def reset() -> None:
    """Forget the clients (settings changed); the next call builds new ones."""
    with _lock:
        old = list(_clients.values())
        _clients.clear()
        _unreachable.clear()
    caller.reset()
    async_caller.reset()
    failover.stop()
    for client in old:
        if isinstance(client, RedisCluster):
            client.close()
        else:
            client.connection_pool.disconnect()


def _get_or_create(purpose: str, timeout: float, *, guarded: bool = False) -> Client:
    """The client for ``purpose``, made now if there is none. ``guarded`` (the limiter's):
    a client that cannot be made (a cluster none of whose startup nodes answers) opens
    the breaker and raises :class:`Unreachable`, and is not tried again before the
    breaker's cooldown has passed; made at last, it closes the breaker."""
    with _lock:
        client = _clients.get(purpose)
        if client is not None:
            return client
        if not guarded:
            client = _clients[purpose] = _create_client(timeout)
            return client
        failed = _unreachable.get(purpose)
        if failed is not None and time.monotonic() < failed[0]:
            raise Unreachable(failed[1])
        try:
            client = _create_client(timeout)
        except REDIS_ERRORS as e:
            # where() only from the settings: the lock is held, no other client is made.
            at = where() if app_settings.CLUSTER_NODES else f"cache {app_settings.CACHE!r}"
            cause = f"no client of the limiter's Redis ({at}) could be made: {e}"
            _unreachable[purpose] = (time.monotonic() + float(app_settings.BREAKER_COOLDOWN), cause)
            breakers.breaker.trip(Unreachable(cause))
            raise Unreachable(cause) from e
        _clients[purpose] = client
        if _unreachable.pop(purpose, None) is not None:
            breakers.breaker.success()  # logs that Redis answers again
        return client


def _create_client(timeout: float) -> Client:
    nodes = app_settings.CLUSTER_NODES
    if nodes:
        return cluster.create_client(list(nodes), timeout)
    alias = app_settings.CACHE
    try:
        cache = caches[alias]
    except Exception as e:  # InvalidCacheBackendError and friends
        message = f"RATELIMITS['CACHE'] names the cache {alias!r}, which is not configured."
        raise ConfigurationError(message) from e
    return cache_pool.client_of(cache, alias, timeout)
