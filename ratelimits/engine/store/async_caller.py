"""Sends decide calls from coroutines, on ``redis.asyncio`` connections: the async I/O step.

The twin of :mod:`ratelimits.engine.store.caller`: the same bytes
(:mod:`ratelimits.engine.store.commands`), the same recovery plan for a server that lost
the code, the same mode per server (a server found without Functions is called by
``EVALSHA`` from both paths). Only the sending differs: coroutines of one event loop
share at most :data:`MAX_CONNECTIONS` connections to a server, each call taking one for
the length of its exchange, so concurrent requests never interleave on a socket. A call
that finds them all busy waits for one, at most the socket timeout, and then fails with
:class:`~ratelimits.engine.store.errors.PoolBusy`: the policy's fail mode, but not a
failure of the server (the breaker does not count it; the calls holding the connections
meet the server's own timeout if it is the one that is slow).

The connections are made from the sync pool's settings (host, port, database,
credentials, TLS and the short timeouts; :mod:`~.async_connections`); a Sentinel-managed
pool's primary is looked up in a worker thread when a connection is made, which is rare.
A pool whose connection class has no ``redis.asyncio`` twin is called through the sync
caller in a thread.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import redis
from redis.asyncio import connection as aconnection

from ratelimits.engine.store import async_connections, caller, commands, errors
from ratelimits.engine.store.commands import DecideCall, Recovery

#: Connections one event loop opens to one server, at most. A call takes about a tenth
#: of a millisecond of the server's time: a few connections serve a busy worker, and a
#: burst of requests does not open a connection each (whose connects would then race
#: the timeout).
MAX_CONNECTIONS = 16


class AsyncCaller:
    """Decide calls to the server of one sync connection pool, from one event loop."""

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self.pool = pool
        #: Shared with the sync path: what the server showed it runs (FUNCTION or SCRIPT).
        self.shared = caller.for_pool(pool)
        self._make = async_connections.connection_factory(pool)
        self._wait = float(pool.connection_kwargs.get("socket_timeout") or 1.0)
        # Last in, first out: a busy loop reuses its warm connections. ``None`` is a slot
        # for a connection not open yet (or closed after a failure: the next call makes a
        # new one, so a Sentinel-managed pool looks up the primary again).
        self._free: asyncio.LifoQueue[aconnection.AbstractConnection | None] = asyncio.LifoQueue()
        for _ in range(MAX_CONNECTIONS):
            self._free.put_nowait(None)
        #: Sentinel's failovers heard of (``None``: not a Sentinel pool), and the count
        #: this loop's connections were made under.
        self._failovers = self.shared.failovers
        self._generation = 0 if self._failovers is None else self._failovers.value

    async def call(self, call: DecideCall) -> Any:
        """The reply to ``call``; redis-py's errors are raised."""
        if self._make is None:  # a connection class of its own: the sync caller, off the loop
            return await asyncio.to_thread(self.shared.call, call)
        if self._failovers is not None and self._generation != self._failovers.value:
            await self._drop_free()  # Sentinel named a new primary
        generation = self._generation
        connection = await self._take()
        try:
            if not connection.is_connected:
                return await self._exchange(connection, call)
            try:
                return await self._exchange(connection, call)
            except (redis.ConnectionError, redis.ResponseError) as error:
                if not isinstance(error, redis.ConnectionError) and not _read_only(error):
                    raise
                # Closed while idle (a restart, a failover's killed clients), or a replica
                # now: once more, on a new connection (to the primary of the moment, under
                # Sentinel; reconnecting this one would reach the same server).
                connection = await self._make()
                return await self._exchange(connection, call)
        finally:
            if connection.is_connected and generation != self._generation:
                await connection.disconnect(nowait=True)  # made for the old primary
            self._free.put_nowait(connection if connection.is_connected else None)

    async def _drop_free(self) -> None:
        """Close the free connections (their server is no longer the primary); the busy
        ones are closed as they come back."""
        assert self._failovers is not None
        self._generation = self._failovers.value
        free = self._free
        # All out first: the queue is last in, first out, so a slot put back at once
        # would be the next one taken, and the connections under it would stay.
        stale = [free.get_nowait() for _ in range(free.qsize())]
        for _ in stale:
            free.put_nowait(None)
        for found in stale:
            if found is not None:
                await found.disconnect(nowait=True)

    async def _take(self) -> aconnection.AbstractConnection:
        """A free connection (made now if its slot has none), or the first one given
        back within the socket timeout."""
        free = self._free
        try:
            found = free.get_nowait()
        except asyncio.QueueEmpty:
            try:
                found = await asyncio.wait_for(free.get(), self._wait)
            except TimeoutError:
                message = f"all {MAX_CONNECTIONS} connections to Redis stayed busy {self._wait} s"
                raise errors.PoolBusy(message) from None
        if found is None:
            try:
                found = await self._make()  # type: ignore[misc]
            except BaseException:
                free.put_nowait(None)
                raise
        return found  # type: ignore[no-any-return]

    async def _exchange(self, connection: aconnection.AbstractConnection, call: DecideCall) -> Any:
        """Send ``call`` and read its reply, recovering a missing code. Any failure but an
        error reply (cancellation included) closes the connection, so a reply left unread
        can never answer the next call."""
        try:
            if not connection.is_connected:
                await connection.connect()
            mode = self.shared.mode
            await connection.send_packed_command((commands.packed(mode, call),), False)
            try:
                return await connection.read_response()
            except redis.ResponseError as error:
                reply, found = await _drive(connection, commands.recover(call, mode, error))
                self.shared.switch_mode(found, error)
                return reply
        except redis.ResponseError as error:
            if _read_only(error):
                # A replica now (a Sentinel failover): the next call looks up the primary.
                await connection.disconnect(nowait=True)
            raise  # otherwise read whole: the connection is clean
        except BaseException:
            await connection.disconnect(nowait=True)
            raise


def _read_only(error: redis.ResponseError) -> bool:
    """A replica's refusal: ``ReadOnlyError``, or Redis 6.2's script error around one."""
    return errors.code_of(error) == "READONLY"


async def _drive(connection: aconnection.AbstractConnection, plan: Recovery) -> tuple[Any, str]:
    """Send what ``plan`` asks on ``connection`` and feed it each reply or error."""
    try:
        command = next(plan)
        while True:
            await connection.send_packed_command((command,), False)
            try:
                reply = await connection.read_response()
            except redis.ResponseError as error:
                reply = error
            command = plan.send(reply)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


#: Each event loop's callers, by pool. A caller's connections hold its loop, so a loop is
#: never let go on its own: the callers of closed loops are dropped when a new loop comes
#: (``async_to_sync`` runs each call in a loop of its own).
_by_loop: dict[asyncio.AbstractEventLoop, dict[int, AsyncCaller]] = {}
_lock = threading.Lock()


def for_pool(pool: redis.ConnectionPool) -> AsyncCaller:
    """The running loop's caller for ``pool``'s server (made on first use)."""
    loop = asyncio.get_running_loop()
    callers = _by_loop.get(loop)
    if callers is None:
        callers = _callers_of_new(loop)
    found = callers.get(id(pool))
    if found is None or found.pool is not pool:
        found = callers[id(pool)] = AsyncCaller(pool)
    return found


def _callers_of_new(loop: asyncio.AbstractEventLoop) -> dict[int, AsyncCaller]:
    """The callers of a loop seen for the first time; those of closed loops are dropped
    (their connections, which cannot be used again, are closed by the garbage collector)."""
    with _lock:
        for closed in [old for old in _by_loop if old.is_closed()]:
            del _by_loop[closed]
        return _by_loop.setdefault(loop, {})


def reset() -> None:
    """Forget every caller (the clients were replaced); connections close as they go."""
    with _lock:
        _by_loop.clear()
    async_connections.reset()
