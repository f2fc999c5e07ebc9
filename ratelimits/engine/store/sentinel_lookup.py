"""Asking the sentinels for the primary: the newest configuration wins.

redis-py's ``Sentinel.discover_master`` takes the first sentinel that names a healthy
primary. Right after a failover the sentinels disagree for a few milliseconds: the one
that ran it names the new primary, the others still name the old one, which an
operator's ``SENTINEL FAILOVER`` leaves taking writes for about ten seconds, until
Sentinel demotes it and throws them away. A limiter that heard the switch
(:mod:`~ratelimits.engine.store.failover`) and reconnected through a sentinel that had
not yet heard it would count there all that time, and admit past its limits.

So the limiter's pools ask every sentinel that answers and take the primary of the
highest ``config-epoch``, the number Sentinel itself uses to let the newest
configuration win. This costs one ``SENTINEL MASTERS`` per sentinel when a connection is
made (once per thread or event-loop connection, and after a failover), never per request.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.sentinel import MasterNotFoundError, Sentinel


class NewestSentinel(Sentinel):
    """redis-py's ``Sentinel``, naming the primary of the newest configuration that any
    sentinel holds rather than the first sentinel's."""

    def discover_master(self, service_name: str) -> tuple[str, int]:
        newest: tuple[int, str, int] | None = None
        errors: list[str] = []
        for sentinel in self.sentinels:
            try:
                masters = sentinel.sentinel_masters()
            except (redis.ConnectionError, redis.TimeoutError) as error:
                errors.append(f"{sentinel} - {error!r}")
                continue
            state = masters.get(service_name)
            if not state or not self.check_master_state(state, service_name):
                continue
            epoch = int(state.get("config-epoch", 0))
            if newest is None or epoch > newest[0]:
                newest = (epoch, state["ip"], int(state["port"]))
        if newest is None:
            found = f": {', '.join(errors)}" if errors else ""
            raise MasterNotFoundError(f"No master found for {service_name!r}{found}")
        forced = getattr(self, "_force_master_ip", None)  # redis-py 8's force_master_ip
        return (forced if forced is not None else newest[1]), newest[2]


def newest_sentinel(manager: Any) -> NewestSentinel:
    """A :class:`NewestSentinel` asking the sentinels of ``manager`` (a redis-py or
    valkey-py ``Sentinel``) with its settings. It is the limiter's own: redis-py's errors
    come out of it, which the breaker knows, and it never reorders the cache's list."""
    addresses = [
        (kwargs["host"], kwargs["port"])
        for kwargs in (s.connection_pool.connection_kwargs for s in manager.sentinels)
    ]
    extra: dict[str, Any] = {}
    forced = getattr(manager, "_force_master_ip", None)
    if forced is not None:
        extra["force_master_ip"] = forced
    return NewestSentinel(
        addresses,
        min_other_sentinels=manager.min_other_sentinels,
        sentinel_kwargs=manager.sentinel_kwargs,
        **extra,
        **manager.connection_kwargs,
    )
