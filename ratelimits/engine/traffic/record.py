"""The traffic record: how far each policy's clients go in their windows, per hour, kept
from the decide call's replies alone.

A reply already says, per policy, the client's count before the request (``count``) and
whether the policy allowed it. A recorded request that a policy admitted took its client's
use from ``count`` to ``count + units``: :func:`tally` counts each level of
:mod:`~.levels` it crossed (usually none, at most one for a request of one unit), plus
the request itself and, when the policy denied it (enforcing or in shadow), the denial.
That is a lock and a few dict additions in this process; no Redis call on the request path.

The counts are kept as the dashboard's per-minute counts are
(:mod:`~ratelimits.engine.reporting.pending_counts`) and go to Redis with them: the same
flusher thread of :mod:`ratelimits.engine.reporting.stats` (every
``METRICS_FLUSH_INTERVAL`` seconds), in one pipelined round trip of their own, with the
same circuit breaker, fork and exit handling::

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

import os
from collections.abc import Sequence

from ratelimits.conf import app_settings, resets_on_setting_change, resets_process_state
from ratelimits.engine.decision import Verdict
from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.reporting import stats
from ratelimits.engine.reporting.pending_counts import Entry, PendingCounts
from ratelimits.engine.traffic.levels import crossed

#: Seconds an hour's hash lives after its last write: a week of hours.
KEY_TTL = 7 * 24 * 3600
#: Hours kept: the span the tools read at most.
HOURS_KEPT = 7 * 24
#: Unsent counts of hours older than this many hours before the current one are dropped.
MAX_AGE_HOURS = 2
#: The hash fields besides the levels.
REQUESTS, DENIED = "requests", "denied"

#: ``RATELIMITS["TRAFFIC"]`` as read: ``None`` until read (again after a change).
_enabled: bool | None = None


def traffic_key(policy: str, hour: int, prefix: str | None = None) -> str:
    """The hash of one policy's hour: ``<prefix>:traffic:{<policy>}:<hour>``."""
    return f"{app_settings.KEY_PREFIX if prefix is None else prefix}:traffic:{{{policy}}}:{hour}"


def _place(entry: Entry, prefix: str) -> tuple[str, str]:
    hour, policy, field = entry
    return traffic_key(policy, hour, prefix), field


#: The counts not yet sent: ``(hour, policy, field) -> n``.
_counts = PendingCounts(
    what="traffic counts",
    period_seconds=3600,
    period_name="hour",
    max_age=MAX_AGE_HOURS,
    key_ttl=KEY_TTL,
    place=_place,
)


def tally(checks: Sequence[Check], verdict: Verdict, *, now: float | None = None) -> None:
    """Count one recorded request's ``verdict`` (one decision per check, in order): the
    levels each admitting policy's client crossed, the request, the denials. No I/O.
    ``now`` (seconds since the epoch): when it was decided (the reply's clock; ``None``:
    this machine's), which decides its hour."""
    if not (_enabled if _enabled is not None else _load()):
        return
    hour = _counts.period(now)
    admitted = verdict.allowed
    with _counts.lock:
        buffer = _counts.counts
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


def pending() -> dict[Entry, int]:
    """A copy of the counts not yet sent: ``{(hour, policy, field): n}``."""
    return _counts.pending()


def flush(*, now: float | None = None) -> bool:
    """Send the buffered counts in one pipelined round trip. True when nothing is left to
    send; False when some were kept for the next flush (Redis unavailable, breaker open).
    Never raises a Redis error."""
    return _counts.flush(now=now)


@resets_process_state
def reset() -> None:
    """Forget the buffer (tests, settings changes)."""
    _counts.reset()


def _load() -> bool:
    global _enabled
    _enabled = app_settings.TRAFFIC is not False
    return _enabled


@resets_on_setting_change("RATELIMITS")
def _forget_enabled() -> None:
    global _enabled
    _enabled = None


if hasattr(os, "register_at_fork"):  # the counts are the parent's to send
    os.register_at_fork(after_in_child=_counts.after_fork)
stats.add_rider(flush)
