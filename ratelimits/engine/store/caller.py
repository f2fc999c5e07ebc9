"""Sends decide calls to one Redis server and reads their replies: the sync I/O step.

Each thread holds a connection of its own to each server (made from the server's pool
settings, outside the pool), so a request neither takes nor gives back a pooled
connection: it writes the call's bytes (:mod:`ratelimits.engine.store.commands`) and
reads one reply. A child process after ``fork`` opens its own connections.

On a plain connection (TCP, TLS or a Unix socket read by hiredis: redis-py's defaults
with hiredis installed) the call's bytes are written on the socket and its reply read
from hiredis's reader directly, raising the errors redis-py raises for the same failures
and handing a RESP3 push message to redis-py's parser as it does; any other connection
(Sentinel's, a subclass, the pure-Python parser) goes through redis-py's
``send_packed_command`` and ``read_response``.

A server that lacks the code answers with an error; :func:`commands.recover` says what
to send until the call has its reply, so a flushed or restarted server costs the
request one or two more round trips, never an error. A held connection that the server
closed while it sat idle (a restart, a failover, an idle timeout) is replaced once
before the error is raised; a timeout is never repeated. Under Sentinel, a held
connection is made again once Sentinel has announced a new primary
(:mod:`ratelimits.engine.store.failover`).
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Any

import redis
from redis.connection import AbstractConnection

try:  # redis-py 5.0 and later; absent or renamed: every connection reads through redis-py
    from redis._parsers import hiredis as _hiredis_parsers
except ImportError:  # pragma: no cover
    _hiredis_parsers = None  # type: ignore[assignment]

from ratelimits.engine.store import commands, failover, scripts
from ratelimits.engine.store.commands import DecideCall, Recovery, bulk_strings

logger = logging.getLogger("ratelimits")


class Caller:
    """Decide calls to the server of one connection pool."""

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self.pool = pool
        #: :data:`commands.FUNCTION` until the server shows it has no Functions.
        self.mode = commands.FUNCTION
        self._held = threading.local()
        #: The failovers heard of, for a Sentinel-managed pool (``None`` otherwise).
        self.failovers = failover.generation_of(pool)

    def call(self, call: DecideCall) -> Any:
        """The reply to ``call``; redis-py's errors are raised."""
        connection: AbstractConnection | None = getattr(self._held, "connection", None)
        if connection is None:
            connection = self._held.connection = self._connect()
            if self.failovers is not None:
                self._held.generation = self.failovers.value
            return self._exchange(connection, call)
        if self.failovers is not None and self._held.generation != self.failovers.value:
            # Sentinel named a new primary: connect() asks it again.
            self._held.generation = self.failovers.value
            connection.disconnect()
            return self._exchange(connection, call)
        try:
            return self._exchange(connection, call)
        except redis.ConnectionError:
            pass  # closed while idle, most likely: once more, on a new socket
        return self._exchange(connection, call)

    def _exchange(self, connection: AbstractConnection, call: DecideCall) -> Any:
        """Send ``call`` and read its reply, recovering a missing code. Any failure but
        an error reply closes the connection: a reply left unread must never answer the
        next call."""
        # The mode is read once: the recovery must judge the error by the command this
        # call sent, not by one another thread switched to meanwhile.
        mode = self.mode
        try:
            if getattr(connection, "_sock", None) is None:
                # Not open (redis-py 8's ``is_connected``, which 5.0 to 7.x lack); a
                # connection class without ``_sock`` is asked to connect every time, which
                # every redis-py's ``connect()`` does only when it is not connected.
                connection.connect()  # through Sentinel, when the pool uses it
            try:
                if _is_plain(connection):
                    return _round_trip(connection, commands.packed(mode, call))
                connection.send_packed_command((commands.packed(mode, call),), check_health=False)
                return connection.read_response()
            except redis.ResponseError as error:
                reply, found = _drive(connection, commands.recover(call, mode, error))
                self.switch_mode(found, error)
                return reply
        except redis.ResponseError:
            raise  # read whole: the connection is clean
        except BaseException:
            connection.disconnect()
            raise

    def switch_mode(self, mode: str, error: Exception) -> None:
        """Call the server as ``mode`` from now on (the sync and async paths both), after
        ``error`` showed it."""
        if mode != self.mode:
            logger.info(
                "ratelimits: Redis answered %r to the decide function; running the "
                "decide code as a script (EVALSHA) on that server from now on.",
                str(error),
            )
            self.mode = mode

    def _connect(self) -> AbstractConnection:
        pool = self.pool
        return pool.connection_class(**pool.connection_kwargs)  # type: ignore[no-any-return]

    def forget_connections(self) -> None:
        """Drop every thread's connection without closing it (after ``fork``: the
        parent still uses the sockets)."""
        self._held = threading.local()


#: What hiredis's reader answers while a reply is incomplete, as redis-py sets it up
#: (``False`` before redis-py's own sentinel object).
_NOT_ENOUGH_DATA = getattr(_hiredis_parsers, "NOT_ENOUGH_DATA", False)
_HiredisParser = getattr(_hiredis_parsers, "_HiredisParser", None)
#: Whether a connection class writes and reads as :class:`AbstractConnection` does.
_plain_classes: dict[type, bool] = {}


def _is_plain(connection: AbstractConnection) -> bool:
    """Whether ``connection`` may be written and read directly (see the module's doc):
    its class keeps redis-py's own send and read, and hiredis reads it (RESP2, or RESP3
    where redis-py's parser takes push messages)."""
    kind = type(connection)
    plain = _plain_classes.get(kind)
    if plain is None:
        plain = _plain_classes[kind] = (
            _HiredisParser is not None
            and isinstance(connection, AbstractConnection)
            and kind.send_packed_command is AbstractConnection.send_packed_command
            and kind.read_response is AbstractConnection.read_response
        )
    if not plain:
        return False
    parser = connection._parser
    # RESP3 only where redis-py's parser takes push messages (redis-py 5.1 and later).
    return type(parser) is _HiredisParser and (
        getattr(connection, "protocol", 2) in (2, "2", None)
        or hasattr(parser, "_hiredis_PushNotificationType")
    )


def _round_trip(connection: AbstractConnection, data: bytes) -> Any:
    """Write ``data`` on ``connection``'s socket and read one reply with its hiredis
    reader: what ``send_packed_command`` then ``read_response`` do, errors included (an
    error reply raised, a timeout as ``redis.TimeoutError``, a socket error or a closed
    connection as ``redis.ConnectionError``), without their layers. The caller
    disconnects on any failure but an error reply."""
    sock, parser = connection._sock, connection._parser
    reader = getattr(parser, "_reader", None)
    buffer = getattr(parser, "_buffer", None)
    if sock is None or reader is None or buffer is None:  # redis-py's path says how
        connection.send_packed_command((data,), check_health=False)
        return connection.read_response()
    pushed = getattr(parser, "_hiredis_PushNotificationType", None)
    try:
        sock.sendall(data)
        while True:
            reply = reader.gets()
            if reply is _NOT_ENOUGH_DATA:
                read = sock.recv_into(buffer)
                if not read:
                    raise redis.ConnectionError("Connection closed by server.")
                reader.feed(buffer, 0, read)
            elif pushed is not None and isinstance(reply, pushed):
                parser.handle_push_response(reply)  # type: ignore[attr-defined]
            else:
                break
    except TimeoutError:
        raise redis.TimeoutError(f"Timeout talking to {_host(connection)}") from None
    except OSError as error:
        raise redis.ConnectionError(f"Error talking to {_host(connection)}: {error}") from error
    if isinstance(reply, (redis.ResponseError, redis.ConnectionError)):
        raise reply  # an error reply (a LOADING server's is a ConnectionError)
    return reply


def _host(connection: AbstractConnection) -> str:
    describe = getattr(connection, "_host_error", None)
    return describe() if describe is not None else repr(connection)


def _drive(connection: AbstractConnection, plan: Recovery) -> tuple[Any, str]:
    """Send what ``plan`` asks on ``connection`` and feed it each reply or error."""
    try:
        command = next(plan)
        while True:
            connection.send_packed_command((command,), check_health=False)
            try:
                reply = connection.read_response()
            except redis.ResponseError as error:
                reply = error
            command = plan.send(reply)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


#: What :func:`peeks_by_function` found for each pipeline it was asked about.
_peeks: weakref.WeakKeyDictionary[redis.client.Pipeline, bool] = weakref.WeakKeyDictionary()


def peeks_by_function(pipeline: redis.client.Pipeline) -> bool:
    """Whether a look queued on ``pipeline`` can be an ``FCALL_RO`` of the peek function
    (asked once per pipeline). One look without keys is sent; the library is loaded
    through :meth:`Caller.call` if it is missing. False where the server has no
    Functions, refuses ``FCALL_RO`` (an ACL), or cannot load the library now: the
    pipeline then queues the script, which reads as well."""
    found = _peeks.get(pipeline)
    if found is None:
        found = _peeks[pipeline] = _answers_peeks(pipeline.connection_pool)
    return found


def _answers_peeks(pool: redis.ConnectionPool) -> bool:
    client = redis.Redis(connection_pool=pool)
    probe = ("FCALL_RO", scripts.peek_function_name(), 0, "", "0")
    try:
        client.execute_command(*probe)
        return True
    except redis.ResponseError as error:
        if not str(error).startswith("Function not found"):
            return False
    try:
        for_pool(pool).call(_EMPTY_LOOK)  # loads the library
        client.execute_command(*probe)
    except redis.ResponseError:
        return False
    return True


#: A look at no key: runs nothing but the clock.
_EMPTY_LOOK = commands.decide_call([], bulk_strings(["", "0"]), 2, read_only=True)


_by_pool: dict[int, Caller] = {}


def for_pool(pool: redis.ConnectionPool) -> Caller:
    """The caller for ``pool``'s server (made on first use)."""
    found = _by_pool.get(id(pool))
    if found is None or found.pool is not pool:
        found = _by_pool[id(pool)] = Caller(pool)
    return found


def reset() -> None:
    """Forget every caller (the clients were replaced); connections close as they go."""
    _by_pool.clear()


def _after_fork_in_child() -> None:
    # The parent's sockets are not ours: leave them to the parent, open new ones.
    for found in list(_by_pool.values()):
        found.forget_connections()


os.register_at_fork(after_in_child=_after_fork_in_child)
