"""Async connections made like a sync pool's, for :mod:`ratelimits.engine.store.async_caller`.

The pool's connection settings (host, port, database, credentials, TLS and the short
timeouts) are carried over to the ``redis.asyncio`` twin of its connection class; a
Sentinel-managed pool's primary is looked up in a worker thread when a connection is made.
Settings the async connection does not take are left out, with a warning (at most once a
minute). :func:`accepted` tells which keyword arguments a connection class takes.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

import redis
from redis.asyncio import connection as aconnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.sentinel import SentinelConnectionPool

from ratelimits.engine.reminders import Reminder

logger = logging.getLogger("ratelimits")

#: The sync pool's connection settings an async connection takes over.
_CARRIED = (
    "host",
    "port",
    "path",
    "db",
    "username",
    "password",
    "credential_provider",
    "client_name",
    "protocol",
    "socket_timeout",
    "socket_connect_timeout",
    "socket_keepalive",
    "socket_keepalive_options",
)

#: The async twin of each sync connection class.
_TWINS: dict[type, type[aconnection.AbstractConnection]] = {
    redis.connection.Connection: aconnection.Connection,
    redis.connection.SSLConnection: aconnection.SSLConnection,
    redis.connection.UnixDomainSocketConnection: aconnection.UnixDomainSocketConnection,
}


AsyncConnectionFactory = Callable[[], Any]


def connection_factory(pool: redis.ConnectionPool) -> AsyncConnectionFactory | None:
    """A coroutine function making an unconnected async connection like ``pool``'s;
    ``None`` when its connection class has no async twin. A Sentinel-managed pool's
    connections are TLS ones when its own are. Settings the async connection does not
    take (``ssl_validate_ocsp``, ``ssl_ocsp_*``: sync only) are left out, with a warning
    naming them as connections are made (at most once a minute)."""
    sentinel = isinstance(pool, SentinelConnectionPool)
    if sentinel:
        tls = issubclass(pool.connection_class, redis.connection.SSLConnection)
        twin: type[aconnection.AbstractConnection] | None = (
            aconnection.SSLConnection if tls else aconnection.Connection
        )
    else:
        twin = _TWINS.get(pool.connection_class)
    if twin is None:
        return None
    settings = pool.connection_kwargs
    wanted = {
        key: value
        for key, value in settings.items()
        if key in _CARRIED or (twin is aconnection.SSLConnection and key.startswith("ssl_"))
    }
    taken = accepted(twin)
    kwargs = {key: value for key, value in wanted.items() if key in taken}
    dropped = sorted(key for key in wanted if key not in taken)
    kwargs["retry"] = Retry(NoBackoff(), 0)
    if sentinel:
        assert isinstance(pool, SentinelConnectionPool)
        make = twin

        async def primary() -> aconnection.AbstractConnection:
            _warn_dropped(dropped, make)
            host, port = await asyncio.to_thread(pool.get_master_address)
            return make(**{**kwargs, "host": host, "port": port})

        return primary
    found = twin

    async def plain() -> aconnection.AbstractConnection:
        _warn_dropped(dropped, found)
        return found(**kwargs)

    return plain


def accepted(cls: type) -> frozenset[str]:
    """The keyword arguments ``cls()`` takes: its ``__init__``'s and, while one passes
    ``**kwargs`` on, its bases'."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        parameters = inspect.signature(init).parameters.values()
        names.update(
            p.name
            for p in parameters
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"
        )
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return frozenset(names)


#: The settings async connections were made without (said again each minute).
_dropped = Reminder()


def _warn_dropped(names: list[str], cls: type) -> None:
    """A warning naming the settings an async connection cannot take, each at most once
    a minute."""
    due = [name for name in names if _dropped.due(name)]
    if due:
        logger.warning(
            "ratelimits: the cache's connection settings %s are not taken by redis-py's "
            "async connections (%s.%s); async views connect without them. Repeated every "
            "minute while the settings stay.",
            ", ".join(due),
            cls.__module__,
            cls.__qualname__,
        )


def reset() -> None:
    """Forget the settings already warned about (the clients were replaced)."""
    _dropped.clear()
