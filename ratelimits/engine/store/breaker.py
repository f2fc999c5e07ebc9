"""A circuit breaker, so that a dead Redis does not add a timeout to every request.

After ``BREAKER_THRESHOLD`` consecutive failures the breaker opens: for
``BREAKER_COOLDOWN`` seconds no request tries Redis, each gets its policy's fail mode at
once. Then one request is let through to try; success closes the breaker, failure opens
it for another cooldown. Opening and closing are logged once each, not per request:
the requests that get their fail mode while the breaker is open write nothing.

A server that answers but refuses calls (full, busy, a replica: see
:mod:`ratelimits.engine.store.errors`) counts as a failure too, and it still answers
reads: so a read that succeeds (the policy table's version check, a look that records
nothing) neither closes a breaker that such a refusal opened nor forgets the refusal;
only a call that wrote does (:meth:`CircuitBreaker.success`). A read never takes the one
try of an open breaker, but after its cooldown a read may look too, and when the breaker
was opened by a server that did not answer at all, a read answered closes it (the usage
endpoint, which only reads, would otherwise wait for a write to come by).

A call that found no connection of our own free (:func:`pool_busy`) is not the server's
failure: the breaker does not count it, and it is logged at most once a minute.
On a Redis Cluster each node has its own breaker (:func:`for_node`).
"""

from __future__ import annotations

import logging
import threading
import time

from ratelimits.conf import app_settings, resets_process_state
from ratelimits.engine.store import errors

logger = logging.getLogger("ratelimits")


class CircuitBreaker:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures = 0
        self._open_until = 0.0
        self._open = False
        #: A failure since the last success was a server refusing calls (it answers).
        self._refused = False

    def allow(self) -> bool:
        """Whether this call may try Redis now."""
        if not self._open:
            return True
        with self._lock:
            now = time.monotonic()
            if now < self._open_until:
                return False
            # Half open: this caller tries; others keep skipping for one more cooldown.
            self._open_until = now + float(app_settings.BREAKER_COOLDOWN)
            return True

    def allow_read(self) -> bool:
        """Whether a call that only reads may try Redis now: not during an open
        breaker's cooldown; after it, yes, without taking the try left to a call that
        writes."""
        return not self._open or time.monotonic() >= self._open_until

    def success(self) -> None:
        """A call that writes was answered: the server takes calls (closes the breaker)."""
        if self._failures or self._open:
            with self._lock:
                if self._open:
                    logger.warning("ratelimits: Redis answers again; limiting resumed.")
                self._failures = 0
                self._open = False
                self._refused = False

    def read_success(self) -> None:
        """A call that only read was answered: the server is up, which does not say it
        takes writes. Forgets failures to reach it, and closes a breaker they opened;
        after a refusal, neither."""
        if (self._failures or self._open) and not self._refused:
            with self._lock:
                if self._refused:
                    return
                if self._open:
                    logger.warning("ratelimits: Redis answers again; limiting resumed.")
                self._failures = 0
                self._open = False

    def failure(self, error: BaseException) -> None:
        with self._lock:
            self._failures += 1
            if errors.code_of(error) is not None:
                self._refused = True
            threshold = int(app_settings.BREAKER_THRESHOLD)
            if self._open or self._failures >= threshold:
                cooldown = float(app_settings.BREAKER_COOLDOWN)
                if not self._open and errors.is_denied(error):
                    logger.error(
                        "ratelimits: Redis refuses this user the limiter's calls (%s): an "
                        "ACL denies scripting (FCALL, and EVALSHA and EVAL), the keys under "
                        "KEY_PREFIX or a command the decide code runs; applying each "
                        "policy's fail mode and retrying "
                        "Redis every %.1f s. docs/redis.md lists the ACL the limiter needs.",
                        errors.describe(error),
                        cooldown,
                    )
                elif not self._open:
                    logger.warning(
                        "ratelimits: Redis unavailable (%s); applying each policy's fail mode "
                        "and retrying Redis every %.1f s.",
                        errors.describe(error),
                        cooldown,
                    )
                self._open = True
                self._open_until = time.monotonic() + cooldown

    def trip(self, error: BaseException) -> None:
        """Open now, whatever the count: nothing of the server could be reached, not
        even to make a client (logged once, when it opens)."""
        with self._lock:
            self._failures = max(self._failures, int(app_settings.BREAKER_THRESHOLD) - 1)
        self.failure(error)

    @property
    def is_open(self) -> bool:
        return self._open

    def reset(self) -> None:
        with self._lock:
            self._failures = 0
            self._open = False
            self._open_until = 0.0
            self._refused = False


#: Seconds between two log lines about calls that found no connection free.
POOL_BUSY_LOG_INTERVAL = 60.0


class _PoolBusyLog:
    """When the last line about a busy pool was written, and the calls met since."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.logged_at: float | None = None
        self.unlogged = 0


_pool_busy = _PoolBusyLog()


def pool_busy(error: BaseException) -> None:
    """A call found every connection of ours to the server taken and none came free in
    time (``error``): its request gets the fail mode, the breaker counts nothing (the
    server is not at fault), and a warning is logged at most every
    :data:`POOL_BUSY_LOG_INTERVAL` seconds, with the calls met since the last one."""
    now = time.monotonic()
    with _pool_busy.lock:
        _pool_busy.unlogged += 1
        last = _pool_busy.logged_at
        if last is not None and now - last < POOL_BUSY_LOG_INTERVAL:
            return
        calls, _pool_busy.unlogged, _pool_busy.logged_at = _pool_busy.unlogged, 0, now
    logger.warning(
        "ratelimits: %d call(s) to Redis found no connection free in this process (%s) and "
        "got their policies' fail mode; this is not counted as a Redis failure. Next "
        "report in %.0f s at the earliest.",
        calls,
        error,
        POOL_BUSY_LOG_INTERVAL,
    )


#: The breaker of the one Redis server (and of a cluster's tools that are not per node).
breaker = CircuitBreaker()

_by_node: dict[str, CircuitBreaker] = {}
_registry_lock = threading.Lock()


def for_node(name: str) -> CircuitBreaker:
    """The breaker of one cluster node (``host:port``), created on first use."""
    found = _by_node.get(name)
    if found is None:
        with _registry_lock:
            found = _by_node.setdefault(name, CircuitBreaker())
    return found


@resets_process_state
def reset_all() -> None:
    """Close every breaker and forget the cluster nodes' ones."""
    breaker.reset()
    with _registry_lock:
        _by_node.clear()
    with _pool_busy.lock:
        _pool_busy.logged_at, _pool_busy.unlogged = None, 0
