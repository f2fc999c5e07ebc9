"""The traffic record: how far each policy's clients go in their windows, per hour, kept
from the decide call's replies alone.

A reply already says, per policy, the client's count before the request (``count``) and
whether the policy allowed it. A recorded request that a policy admitted took its client's
use from ``count`` to ``count + units``: :func:`tally` counts each level of
:mod:`~.levels` it crossed (usually none, at most one for a request of one unit), plus
the request itself and, when the policy denied it (enforcing or in shadow), the denial.
That is a lock and a few dict additions in this process; no Redis call on the request path.

The counts go to Redis with the dashboard's per-minute counts: the same flusher thread of
:mod:`ratelimits.engine.reporting.stats` (every ``METRICS_FLUSH_INTERVAL`` seconds), in one
pipelined round trip of its own, with the same circuit breaker, fork and exit handling::

    HINCRBY <prefix>:traffic:{<policy>}:<hour> <level> <n>      (each level crossed)
    HINCRBY <prefix>:traffic:{<policy>}:<hour> requests <n>     (decisions recorded)
    HINCRBY <prefix>:traffic:{<policy>}:<hour> denied <n>       (of which denied)
    EXPIRE  <prefix>:traffic:{<policy>}:<hour> 604800           (7 days, each hash touched)

``hour`` is the hour of the reply's clock (Redis ``TIME``, or a replay's ``now``; a
denial a worker answered itself, from its own clock). The policy is the hash tag: on
a cluster, one policy's hours live in one slot (read back in one round trip) and policies
spread over the nodes. A hash holds at most :data:`~.levels.LEVELS` fields plus two, small
integers in a listpack: about 200 to 500 bytes an hour, under 64 KB a policy for the 168
hours it keeps, whatever the number of clients (see ``docs/tuning.md``).

``RATELIMITS["TRAFFIC"] = False`` turns the record off everywhere; a policy's ``traffic``
field (``Policy.traffic``) turns it off for that policy.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Sequence

from ratelimits.conf import app_settings, resets_on_setting_change, resets_process_state
from ratelimits.engine.decision import Verdict
from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.reporting import stats
from ratelimits.engine.store import breaker as breakers
from ratelimits.engine.store import connection, errors
from ratelimits.engine.store import route as routes
from ratelimits.engine.traffic.levels import crossed
from ratelimits.exceptions import ConfigurationError

logger = logging.getLogger("ratelimits")

#: Seconds an hour's hash lives after its last write: a week of hours.
KEY_TTL = 7 * 24 * 3600
#: Hours kept: the span the tools read at most.
HOURS_KEPT = 7 * 24
#: Unsent counts of hours older than this many hours before the current one are dropped.
MAX_AGE_HOURS = 2
#: The hash fields besides the levels.
REQUESTS, DENIED = "requests", "denied"

_Entry = tuple[int, str, str]  # (hour, policy, field)

_lock = threading.Lock()  # guards the buffer
_flush_lock = threading.Lock()  # one flush at a time
_buffer: dict[_Entry, int] = {}
_generation = 0  # bumped by reset(): a flush in flight must not refill a reset buffer
#: ``RATELIMITS["TRAFFIC"]`` as read: ``None`` until read (again after a change).
_enabled: bool | None = None


def traffic_key(policy: str, hour: int, prefix: str | None = None) -> str:
    """The hash of one policy's hour: ``<prefix>:traffic:{<policy>}:<hour>``."""
    return f"{app_settings.KEY_PREFIX if prefix is None else prefix}:traffic:{{{policy}}}:{hour}"


def tally(checks: Sequence[Check], verdict: Verdict, *, now: float | None = None) -> None:
    """Count one recorded request's ``verdict`` (one decision per check, in order): the
    levels each admitting policy's client crossed, the request, the denials. No I/O.
    ``now`` (seconds since the epoch): when it was decided (the reply's clock; ``None``:
    this machine's), which decides its hour."""
    if not (_enabled if _enabled is not None else _load()):
        return
    hour = int((time.time() if now is None else now) // 3600)
    admitted = verdict.allowed
    with _lock:
        buffer = _buffer
        for index, decision in enumerate(verdict.decisions):
            check = checks[index]
            policy = check.policy
            if not policy.traffic or decision.failed:
                continue
            key = (hour, policy.name, REQUESTS)
            buffer[key] = buffer.get(key, 0) + 1
            if not decision.allowed:
                key = (hour, policy.name, DENIED)
                buffer[key] = buffer.get(key, 0) + 1
            elif admitted and not decision.cached:
                for level in crossed(decision.count, check.units):
                    key = (hour, policy.name, str(level))
                    buffer[key] = buffer.get(key, 0) + 1


def pending() -> dict[_Entry, int]:
    """A copy of the counts not yet sent: ``{(hour, policy, field): n}``."""
    with _lock:
        return dict(_buffer)


def flush(*, now: float | None = None) -> bool:
    """Send the buffered counts in one pipelined round trip. True when nothing is left to
    send; False when some were kept for the next flush (Redis unavailable, breaker open).
    Never raises a Redis error."""
    with _flush_lock:
        return _flush(time.time() if now is None else now)


def _flush(now: float) -> bool:
    with _lock:
        _drop_old(now)
        if not _buffer:
            return True
        batch = Counter(_buffer)
        _buffer.clear()
        generation = _generation
    entries = sorted(batch.items())
    prefix = app_settings.KEY_PREFIX
    hashes = sorted({(hour, policy) for (hour, policy, _), _ in entries})
    try:
        route = routes.current()
        newest = max(hashes)
        breaker = route.guard(traffic_key(newest[1], newest[0], prefix))
    except ConfigurationError as e:
        breakers.breaker.failure(e)
        _put_back(batch, generation, now)
        return False
    except routes.BreakerOpen:
        _put_back(batch, generation, now)
        return False
    try:
        pipe = route.client.pipeline(transaction=False)
        for (hour, policy, field), n in entries:
            pipe.hincrby(traffic_key(policy, hour, prefix), field, n)
        for hour, policy in hashes:
            pipe.expire(traffic_key(policy, hour, prefix), KEY_TTL)
        replies = pipe.execute(raise_on_error=False)
    except connection.REDIS_ERRORS as e:
        breaker.failure(e)
        logger.debug("ratelimits: traffic flush failed (%s); %d counts kept", e, len(batch))
        _put_back(batch, generation, now)
        return False
    retry: Counter[_Entry] = Counter()
    refused: Exception | None = None
    for (entry, n), reply in zip(entries, replies, strict=False):
        if isinstance(reply, Exception) and errors.code_of(reply) is not None:
            retry[entry] = n  # refused for now (a replica after a failover, a full server)
            refused = reply
        elif isinstance(reply, Exception):
            logger.error(
                "ratelimits: could not record traffic at %s (%s); %d dropped.",
                traffic_key(entry[1], entry[0], prefix),
                reply,
                n,
            )
    if refused is not None:
        breaker.failure(refused)
        _put_back(retry, generation, now)
        return False
    breaker.success()
    return True


def _put_back(batch: Counter[_Entry], generation: int, now: float) -> None:
    with _lock:
        if generation != _generation:
            return  # reset() ran meanwhile
        for entry, n in batch.items():
            _buffer[entry] = _buffer.get(entry, 0) + n
        _drop_old(now)


def _drop_old(now: float) -> None:
    """Drop the counts of hours too old to send (call with ``_lock`` held)."""
    oldest = int(now // 3600) - MAX_AGE_HOURS
    old = [entry for entry in _buffer if entry[0] < oldest]
    if old:
        lost = sum(_buffer.pop(entry) for entry in old)
        logger.warning(
            "ratelimits: dropped %d traffic counts older than %d hours that could not be "
            "sent to Redis.",
            lost,
            MAX_AGE_HOURS,
        )


@resets_process_state
def reset() -> None:
    """Forget the buffer (tests, settings changes)."""
    global _generation
    with _lock:
        _buffer.clear()
        _generation += 1


def _load() -> bool:
    global _enabled
    _enabled = app_settings.TRAFFIC is not False
    return _enabled


@resets_on_setting_change("RATELIMITS")
def _forget_enabled() -> None:
    global _enabled
    _enabled = None


def _after_fork_in_child() -> None:
    # A thread of the parent may have held a lock at the fork; the counts are the parent's.
    global _lock, _flush_lock
    _lock = threading.Lock()
    _flush_lock = threading.Lock()
    _buffer.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
stats.add_rider(flush)
