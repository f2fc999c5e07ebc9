"""Whether the counters' Redis may evict them, and how many keys it has evicted.

A Redis with ``maxmemory`` set and a ``maxmemory-policy`` other than ``noeviction``
deletes keys when it fills: counters, lockouts and leases among them (every key of this
app has a TTL, so the ``volatile-*`` policies pick them too). Limits then start again
from zero and lockouts lift, and nothing fails to say so. A cache's Redis usually runs
``allkeys-lru``. Under ``noeviction`` a full Redis refuses writes instead, and each
policy's fail mode applies (:mod:`ratelimits.engine.store.errors`).

The settings are read with ``INFO memory``, which managed services and ACL users that
may not run ``CONFIG`` usually still allow; ``CONFIG GET`` is the fallback. Read on
demand (the system check, the admin dashboard, a Prometheus scrape), never per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from ratelimits.engine.store import connection
from ratelimits.engine.store.connection import Client

#: The policy under which a full Redis refuses writes instead of deleting keys.
NO_EVICTION = "noeviction"


@dataclass(frozen=True)
class Memory:
    """One primary's memory settings and evictions."""

    #: ``host:port`` (or a Sentinel service), as :func:`connection.describe` names it.
    node: str
    #: Bytes; 0 is no limit.
    maxmemory: int
    policy: str
    #: Keys evicted since the server started (``INFO stats``); ``None``: not readable.
    evicted_keys: int | None

    @property
    def can_evict(self) -> bool:
        """True when this server deletes keys once it is full."""
        return self.maxmemory > 0 and self.policy != NO_EVICTION

    @property
    def maxmemory_text(self) -> str:
        """``maxmemory`` for people: ``"1.5 MB"``, ``"no limit"``."""
        if self.maxmemory <= 0:
            return "no limit"
        size = float(self.maxmemory)
        for unit in ("B", "KB", "MB", "GB"):
            if size < 1024 or unit == "GB":
                return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
            size /= 1024
        raise AssertionError("unreachable")


def read(client: Client) -> list[Memory]:
    """Each primary's :class:`Memory` (one on a single server); Redis errors are raised."""
    return [read_node(node) for node in connection.node_clients(client)]


def read_node(node: redis.Redis) -> Memory:
    """One server's :class:`Memory`: ``INFO memory`` and ``INFO stats``, or ``CONFIG GET``
    where ``INFO`` is refused or lacks the fields. Raises the error of ``INFO`` when
    neither answers."""
    try:
        memory: dict[str, Any] = node.info("memory")
    except redis.ResponseError as refused:  # NOPERM for an ACL user, a renamed command
        memory, info_error = {}, refused
    else:
        info_error = None
    maxmemory, policy = memory.get("maxmemory"), memory.get("maxmemory_policy")
    if maxmemory is None or policy is None:
        try:
            config = node.config_get("maxmemory*")
        except redis.ResponseError:
            if info_error is not None:
                raise info_error from None
            raise
        maxmemory = config.get("maxmemory", maxmemory)
        policy = config.get("maxmemory-policy", policy)
    return Memory(
        node=connection.describe(node),
        maxmemory=int(maxmemory or 0),
        policy=_text(policy) or "unknown",
        evicted_keys=_evicted_keys(node),
    )


def _evicted_keys(node: redis.Redis) -> int | None:
    try:
        found = node.info("stats").get("evicted_keys")
    except redis.ResponseError:
        return None
    return None if found is None else int(found)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")
