"""A circuit breaker, so that a dead Redis does not add a timeout to every request.

After ``BREAKER_THRESHOLD`` consecutive failures the breaker opens: for
``BREAKER_COOLDOWN`` seconds no request tries Redis, each gets its policy's fail mode at
once. Then one request is let through to try; success closes the breaker, failure opens
it for another cooldown. Opening and closing are logged once each, not per request.
On a Redis Cluster each node has its own breaker (:func:`for_node`).
"""

from __future__ import annotations

import logging
import threading
import time

from ratelimits.conf import app_settings

logger = logging.getLogger("ratelimits")


class CircuitBreaker:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures = 0
        self._open_until = 0.0
        self._open = False

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

    def success(self) -> None:
        if self._failures or self._open:
            with self._lock:
                if self._open:
                    logger.warning("ratelimits: Redis answers again; limiting resumed.")
                self._failures = 0
                self._open = False

    def failure(self, error: BaseException) -> None:
        with self._lock:
            self._failures += 1
            threshold = int(app_settings.BREAKER_THRESHOLD)
            if self._open or self._failures >= threshold:
                cooldown = float(app_settings.BREAKER_COOLDOWN)
                if not self._open:
                    logger.warning(
                        "ratelimits: Redis unavailable (%s); applying each policy's fail mode "
                        "and retrying Redis every %.1f s.",
                        error,
                        cooldown,
                    )
                self._open = True
                self._open_until = time.monotonic() + cooldown

    @property
    def is_open(self) -> bool:
        return self._open

    def reset(self) -> None:
        with self._lock:
            self._failures = 0
            self._open = False
            self._open_until = 0.0


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


def reset_all() -> None:
    """Close every breaker and forget the cluster nodes' ones."""
    breaker.reset()
    with _registry_lock:
        _by_node.clear()
