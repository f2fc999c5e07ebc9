"""Sentinel's failovers, heard as they happen.

A held connection to a Sentinel-managed primary stays on that server until it fails. After
an operator's ``SENTINEL FAILOVER`` the old primary keeps answering, and taking writes that
its demotion then throws away, until Sentinel demotes it (about ten seconds): the limiter
would count there, and lose what it counted. So each process listens for Sentinel's
``+switch-master`` on its sentinels, in one daemon thread per service, and bumps that
service's :class:`Generation`. A caller compares the generation its connection was made in
with the current one before each call (one integer comparison, only for Sentinel pools) and
reconnects, through Sentinel, to the new primary.

The listener tries the sentinels in turn, each for as long as it answers, and waits
:data:`RETRY_SECONDS` between rounds when none does. A forked child starts its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any

import redis
from redis.sentinel import SentinelConnectionPool

logger = logging.getLogger("ratelimits")

#: Sentinel's channel announcing a new primary: ``<service> <old ip> <old port> <new ip>
#: <new port>``.
CHANNEL = "+switch-master"
#: Seconds between rounds of the sentinels when none answered, and the longest a listener
#: waits for a message before it checks whether it should stop.
RETRY_SECONDS = 1.0


class Generation:
    """How many failovers of one service this process has heard of."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


class _Listener:
    """One service's listening thread and the event that stops it."""

    def __init__(self, service: str, sentinels: list[Any], generation: Generation) -> None:
        self.service, self.sentinels, self.generation = service, sentinels, generation
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self.run, name=f"ratelimits-sentinel-{service}", daemon=True
        )

    def run(self) -> None:
        while not self.stop.is_set():
            for sentinel in self.sentinels:
                self._listen(sentinel)
                if self.stop.is_set():
                    return
            self.stop.wait(RETRY_SECONDS)

    def _listen(self, sentinel: Any) -> None:
        """Hear ``sentinel``'s announcements until it fails or the listener stops."""
        pubsub = sentinel.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(CHANNEL)
            while not self.stop.is_set():
                message = pubsub.get_message(timeout=RETRY_SECONDS)
                if message is not None and self._names_service(message.get("data")):
                    self.generation.value += 1
                    logger.info(
                        "ratelimits: Sentinel switched the primary of %r (%s); reconnecting.",
                        self.service,
                        _text(message.get("data")),
                    )
        except (redis.RedisError, OSError, ValueError):
            pass  # this sentinel is gone: the next one
        finally:
            with contextlib.suppress(redis.RedisError, OSError):
                pubsub.close()

    def _names_service(self, data: Any) -> bool:
        return _text(data).split(" ", 1)[0] == self.service


def _text(data: Any) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else str(data)


_lock = threading.Lock()
_listeners: dict[str, _Listener] = {}


def generation_of(pool: Any) -> Generation | None:
    """The failover generation of ``pool``'s service, its listener started; ``None`` for a
    pool that Sentinel does not manage."""
    if not isinstance(pool, SentinelConnectionPool):
        return None
    service = pool.service_name
    with _lock:
        listener = _listeners.get(service)
        if listener is None:
            sentinels = list(pool.sentinel_manager.sentinels)
            listener = _listeners[service] = _Listener(service, sentinels, Generation())
            listener.thread.start()
        return listener.generation


def stop() -> None:
    """Stop every listener (the clients were replaced); new pools start new ones."""
    with _lock:
        listeners = list(_listeners.values())
        _listeners.clear()
    for listener in listeners:
        listener.stop.set()


def _after_fork_in_child() -> None:
    # The parent's threads did not come along (and one may have held the lock): listen
    # again, keeping the generations the callers already hold.
    global _lock
    _lock = threading.Lock()
    for service, listener in list(_listeners.items()):
        again = _Listener(service, listener.sentinels, listener.generation)
        _listeners[service] = again
        again.thread.start()


os.register_at_fork(after_in_child=_after_fork_in_child)
