"""Where the limiter's calls go, chosen once per client: one server (Sentinel's primary
too) or a Redis Cluster.

A route owns everything that differs between the two, so that nothing on the request
path asks "is this a cluster?":

- the circuit breaker a key's call answers to (:meth:`ServerRoute.guard`): one for the
  server, one per cluster node;
- how a request's keys group into calls (:meth:`ServerRoute.groups`): one call on a
  server, one per hash slot on a cluster;
- the send of a decide call, sync and async (:meth:`ServerRoute.send`,
  :meth:`ServerRoute.asend`), a cluster's moving slots followed (``ASK``, ``MOVED``,
  ``TRYAGAIN``).

:func:`current` gives the route of the limiter's client, made once per client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.cluster import RedisCluster

from ratelimits.engine.store import async_caller, caller, cluster, connection, scripts
from ratelimits.engine.store import breaker as breakers
from ratelimits.engine.store.commands import DecideCall

#: The arguments of a decide call, as strings: only asked for when a moving slot is
#: followed (the call is then sent as redis-py's client sends commands).
Arguments = Callable[[], list[str]]


class BreakerOpen(Exception):
    """A server the call needs is skipped by its open circuit breaker."""


class ServerRoute:
    """One server: one breaker, one call per request, sent on the thread's (or the
    loop's) own connection."""

    is_cluster = False

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def breaker(self, key: str) -> breakers.CircuitBreaker:
        """The breaker of the server holding ``key``."""
        return breakers.breaker

    def guard(self, key: str, *, writes: bool = True) -> breakers.CircuitBreaker:
        """:meth:`breaker` for ``key``, when it lets a call try now; raises
        :class:`BreakerOpen` otherwise. A call that only reads never takes an open
        breaker's one try: its success would not show that the server takes writes."""
        guard = self.breaker(key)
        if not (guard.allow() if writes else guard.allow_read()):
            raise BreakerOpen
        return guard

    def groups(self, keys: Sequence[str]) -> list[list[int]]:
        """The indexes of ``keys`` grouped by the call that may touch them together."""
        return [list(range(len(keys)))]

    def send(self, keys: list[str], call: DecideCall, arguments: Arguments) -> Any:
        """``call`` for ``keys`` (one group) on the server that holds them."""
        return caller.for_pool(self.client.connection_pool).call(call)

    async def asend(self, keys: list[str], call: DecideCall, arguments: Arguments) -> Any:
        """:meth:`send` on a ``redis.asyncio`` connection of the running loop."""
        return await async_caller.for_pool(self.client.connection_pool).call(call)


class ClusterRoute(ServerRoute):
    """A Redis Cluster: a breaker per node, a call per hash slot, sent to the slot's
    primary, a moving slot followed."""

    is_cluster = True
    client: RedisCluster  # type: ignore[assignment]

    def breaker(self, key: str) -> breakers.CircuitBreaker:
        return breakers.for_node(self.client.get_node_from_key(key).name)

    def groups(self, keys: Sequence[str]) -> list[list[int]]:
        by_slot: dict[int, list[int]] = {}
        for index, key in enumerate(keys):
            by_slot.setdefault(int(self.client.keyslot(key)), []).append(index)
        return list(by_slot.values())

    def send(self, keys: list[str], call: DecideCall, arguments: Arguments) -> Any:
        node = connection.node_client(self.client, keys[0])
        try:
            return caller.for_pool(node.connection_pool).call(call)
        except (redis.exceptions.AskError, redis.exceptions.TryAgainError) as moving:
            return self.follow(moving, keys, arguments())

    async def asend(self, keys: list[str], call: DecideCall, arguments: Arguments) -> Any:
        node = connection.node_client(self.client, keys[0])
        try:
            return await async_caller.for_pool(node.connection_pool).call(call)
        except (redis.exceptions.AskError, redis.exceptions.TryAgainError) as moving:
            # A moving slot is rare: followed as on the sync path, off the loop.
            return await asyncio.to_thread(self.follow, moving, keys, arguments())

    def follow(self, moving: Exception, keys: list[str], args: list[str]) -> Any:
        """The call for ``keys`` while their slot moves (``moving``: the ``ASK`` or
        ``TRYAGAIN`` the owner answered), running the source so that no node needs
        anything loaded.

        ``ASK`` and ``MOVED`` (redis-py's ``MovedError`` is an ``AskError``) are followed
        here: ``ASKING``, then the call, on the node named; after ``MOVED`` the client's
        slot map learns the new owner, so the next requests go there at once. redis-py's
        cluster client fails on an ``ASK`` to a primary that owns no slot yet, as a new
        one while it fills (its node cache has no such node: redis-py #4015).
        ``TRYAGAIN`` goes through redis-py's client, which waits and retries. Whatever
        that client raises that is not a Redis error is turned into one, so that the
        request gets its policies' fail mode, never a 500."""
        source = scripts.decide_source()
        client = self.client
        if isinstance(moving, redis.exceptions.MovedError):
            cluster.learn_moved(client, moving)
        if isinstance(moving, redis.exceptions.AskError):
            asked = cluster.asked_client(client, moving.host, moving.port)
            pipe = asked.pipeline(transaction=False)
            pipe.execute_command("ASKING")
            pipe.execute_command("EVAL", source, len(keys), *keys, *args)
            return pipe.execute()[1]
        try:
            return client.execute_command("EVAL", source, len(keys), *keys, *args)
        except connection.REDIS_ERRORS:
            raise
        except Exception as e:  # the cluster client's own failure while following
            raise redis.exceptions.ClusterError(
                f"the cluster client failed to follow a moving slot: {e!r}"
            ) from e


Route = ServerRoute

#: The limiter's client and its route (swapped whole: thread-safe).
_current: tuple[Any, ServerRoute] | None = None


def route_for(client: connection.Client) -> ServerRoute:
    """A route for ``client`` (a tool's, say): made now, kept by no one."""
    return ClusterRoute(client) if isinstance(client, RedisCluster) else ServerRoute(client)


def current() -> ServerRoute:
    """The route of the limiter's client (see :func:`connection.get_client`, whose errors
    it raises: ``Unreachable``, ``ConfigurationError``), made once per client."""
    global _current
    client = connection.get_client()
    known = _current
    if known is not None and known[0] is client:
        return known[1]
    route = route_for(client)
    _current = (client, route)
    return route
