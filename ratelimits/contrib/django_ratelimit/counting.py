"""Where a django-ratelimit policy's counters live (``RATELIMIT_USE_CACHE``), and one
policy decided there for a request.

``RATELIMIT_USE_CACHE`` unset, or naming the cache the limiter uses
(``RATELIMITS["CACHE"]``): the limiter's Redis, as for every other face (its circuit
breaker, remembered denials and statistics). Naming another django-redis (or
django-valkey) cache: that cache's Redis, with each policy's fail mode when it cannot
answer. Naming a cache that keeps nothing (Django's ``DummyCache``): nothing is counted
and nothing limited, as django-ratelimit counts nothing there. Naming a cache that is not
configured: ``InvalidCacheBackendError``, as django-ratelimit raises. Any other cache
(local memory, memcached): the limiter's Redis; the system check
``ratelimits.W050`` says so.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.dummy import DummyCache

from ratelimits.conf import app_settings, resets_on_setting_change
from ratelimits.engine.decision import Verdict, fail_verdict
from ratelimits.engine.limiter import adecide, decide, evaluate
from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.store import cache_pool, connection
from ratelimits.exceptions import ConfigurationError


class Where(enum.Enum):
    """Where the counters live, when not on another cache's Redis."""

    LIMITER = "the limiter's Redis"
    NOWHERE = "a cache that keeps nothing"


_lock = threading.Lock()
_clients: dict[str, Any] = {}


def where() -> Where | Any:
    """:class:`Where` the counters of ``RATELIMIT_USE_CACHE`` live, or the Redis client of
    the other cache that holds them (see the module); ``InvalidCacheBackendError`` for a
    cache that is not configured."""
    alias = getattr(settings, "RATELIMIT_USE_CACHE", None)
    if alias is None or (alias == app_settings.CACHE and not app_settings.CLUSTER_NODES):
        return Where.LIMITER
    cache = caches[alias]
    if isinstance(cache, DummyCache):
        return Where.NOWHERE
    client = _clients.get(alias)
    if client is None:
        with _lock:
            try:
                client = cache_pool.client_of(cache, alias, float(app_settings.SOCKET_TIMEOUT))
            except ConfigurationError:  # not a Redis: the limiter's (ratelimits.W050)
                client = Where.LIMITER
            _clients[alias] = client
    return client


def counted(checks: Sequence[Check]) -> Verdict:
    """Decide ``checks`` where their counters live, recording them."""
    found = where()
    if found is Where.LIMITER:
        return decide(checks)
    if found is Where.NOWHERE:
        return Verdict()
    return _on_other_cache(found, checks)


async def acounted(checks: Sequence[Check]) -> Verdict:
    """:func:`counted` from a coroutine: on the limiter's Redis without a thread; on
    another cache's (an unusual setup) in one."""
    found = where()
    if found is Where.LIMITER:
        return await adecide(checks)
    if found is Where.NOWHERE:
        return Verdict()
    return await sync_to_async(_on_other_cache, thread_sensitive=False)(found, checks)


def peeked(checks: Sequence[Check]) -> Verdict:
    """What ``checks`` would decide now where their counters live, spending nothing."""
    found = where()
    if found is Where.LIMITER:
        return decide(checks, record=False)
    if found is Where.NOWHERE:
        return Verdict()
    return _on_other_cache(found, checks, record=False)


def _on_other_cache(client: Any, checks: Sequence[Check], record: bool = True) -> Verdict:
    """``checks`` decided on another cache's Redis; each policy's fail mode when it
    cannot answer."""
    try:
        return evaluate(checks, client, record=record)[1]
    except (*connection.REDIS_ERRORS, ConfigurationError, OSError):
        return fail_verdict(checks)


@resets_on_setting_change("CACHES", "RATELIMITS", "RATELIMIT_USE_CACHE")
def _forget() -> None:
    with _lock:
        for client in _clients.values():
            if client is not Where.LIMITER:
                connection.close(client)
        _clients.clear()
