"""Requests per policy per minute, kept in Redis for the admin's dashboard.

The request path only counts in memory: :func:`count` takes a lock and adds to a dict,
no I/O (the counts are a :class:`~.pending_counts.PendingCounts`, as the traffic
record's are). A daemon thread per process (started by the first :func:`count`, and
again in a forked child) sends the counts every ``METRICS_FLUSH_INTERVAL`` seconds in one
pipelined round trip::

    HINCRBY <prefix>:stats:<minute> <policy>:<outcome> <n>    (for each count)
    EXPIRE  <prefix>:stats:<minute> 7200                      (for each minute touched)

where ``minute`` is ``int(time.time() // 60)`` on the app server when the request was
decided. :mod:`ratelimits.tools.stats_reading` reads the hashes back for the admin.

Outcomes (:func:`ratelimits.engine.decision.outcome`; also the Prometheus counters'
``outcome`` label), per decision (a request under three
policies counts once in each):

``allowed``         the policy admitted the request and it went through
``denied``          an enforcing policy denied it (429)
``shadow_denied``   a shadow policy would have denied it (it went through)
``not_counted``     the policy admitted it but another policy denied the request
``failed_open``     Redis could not answer; the policy let the request through
``failed_closed``   Redis could not answer; the policy denied it (429)

Besides its outcome, an admitted request counts ``near_limit`` under each policy whose
count it took to ``NEAR_LIMIT`` of the client's limit (:mod:`~.near_limit`;
field ``<policy>:near_limit``). The dashboard shows it beside the outcomes.

Failures get their own outcomes rather than being folded into allowed / denied, so the
chart does not show an outage as ordinary traffic. They are kept in the buffer while
Redis is down and land in their minutes once it answers again.

Redis failures: the flusher uses the limiter's fast-fail client and its circuit breaker.
While the breaker is open the flusher does not try; when it tries, it reports the result
to the breaker like a request would, so a successful flush closes the breaker (the
flusher then serves as the breaker's probe instead of a request paying a timeout). Counts
that could not be sent stay in the buffer and go with the next flush; counts for minutes
more than :data:`MAX_AGE_MINUTES` old are dropped (with a warning), so a dead Redis
cannot grow the buffer without bound. Delivery is at least once: if Redis applied a
flush but its reply was lost (a timeout after the write), the retry counts it again. A
refused connection or an open breaker never double counts. A count the server refuses
(``WRONGTYPE``: a foreign value at a stats key) is dropped and logged.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable

from ratelimits.conf import app_settings, resets_process_state
from ratelimits.engine.decision import Outcomes
from ratelimits.engine.reporting.pending_counts import Entry, PendingCounts

logger = logging.getLogger("ratelimits")

#: Seconds a minute's hash lives in Redis after its last write.
KEY_TTL = 2 * 3600
#: Unsent counts older than this many minutes (before the current one) are dropped.
MAX_AGE_MINUTES = 60

_lock = threading.Lock()  # guards the flusher state below
_pid: int | None = None  # the process that owns the counts and _flusher
_flusher: _Flusher | None = None
_atexit_registered = False
#: Other buffers sent by the same thread after the counts, each by its own flush
#: (:func:`add_rider`): the traffic record.
_riders: list[Callable[[], object]] = []


def stats_key(minute: int, prefix: str | None = None) -> str:
    """The hash holding one minute's counts: ``<prefix>:stats:<minute>``."""
    return f"{app_settings.KEY_PREFIX if prefix is None else prefix}:stats:{minute}"


def _place(entry: Entry, prefix: str) -> tuple[str, str]:
    minute, policy, outcome = entry
    return stats_key(minute, prefix), f"{policy}:{outcome}"


#: The counts not yet sent: ``(minute, policy, outcome) -> n``.
_counts = PendingCounts(
    what="request counts",
    period_seconds=60,
    period_name="minute",
    max_age=MAX_AGE_MINUTES,
    key_ttl=KEY_TTL,
    place=_place,
)


def count(counted: Outcomes, *, now: float | None = None) -> None:
    """Count one request's ``(policy, outcome)`` pairs in this process's buffer. No I/O:
    cheap enough for every request. ``now`` (seconds since the epoch) is for tests."""
    if not counted:
        return
    if _pid is None:  # first use in this process (the fork hook clears it in a child)
        _adopt()
    minute = _counts.period(now)
    with _counts.lock:
        counts = _counts.counts
        for policy, what in counted:
            entry = (minute, policy, what)
            counts[entry] = counts.get(entry, 0) + 1


def add_rider(flush_other: Callable[[], object]) -> None:
    """Have this process's flusher also call ``flush_other`` (which must never raise a
    Redis error) after each flush of the counts, and at exit."""
    if flush_other not in _riders:
        _riders.append(flush_other)


def pending() -> dict[Entry, int]:
    """A copy of the counts not yet sent: ``{(minute, policy, outcome): n}``."""
    return _counts.pending()


def flush(*, now: float | None = None) -> bool:
    """Send the buffered counts now, in one round trip. True when nothing is left to send;
    False when some were kept for the next flush (Redis unavailable, breaker open).
    Never raises a Redis error. ``now`` is for tests (it decides which minutes are too old).
    """
    return _counts.flush(now=now)


class _Flusher(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="ratelimits-metrics", daemon=True)
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(_interval()):
            for send in (flush, *_riders):
                try:
                    send()
                except Exception:  # never let the thread die: the next interval tries again
                    logger.exception("ratelimits: metrics flush failed")

    def stop(self, timeout: float | None = 1.0) -> None:
        self.stopped.set()
        if self is not threading.current_thread() and self.is_alive():
            self.join(timeout)


def _interval() -> float:
    try:
        value = float(app_settings.METRICS_FLUSH_INTERVAL)
    except (TypeError, ValueError):
        return 5.0
    return value if value > 0 else 5.0


def _adopt() -> None:
    """Make this process the owner of the buffer and start its flusher. After a fork
    the inherited counts are the parent's to send, so the child starts empty."""
    global _pid, _flusher, _atexit_registered
    pid = os.getpid()
    with _lock:
        if _pid == pid:
            return
        if _pid is not None:
            _counts.reset()
        _pid = pid
        _flusher = _Flusher()
        _flusher.start()
        if not _atexit_registered:
            atexit.register(_at_exit)
            _atexit_registered = True


def _after_fork_in_child() -> None:
    # A thread of the parent may have held a lock at the fork: the child needs new ones.
    global _lock, _pid, _flusher
    _lock = threading.Lock()
    _counts.after_fork()
    _pid = None
    _flusher = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _at_exit() -> None:
    """Best effort: send what is left when the interpreter exits."""
    flusher = _flusher
    if _pid != os.getpid() or flusher is None:
        return
    flusher.stop(timeout=1.0)
    for send in (flush, *_riders):
        try:
            send()
        except Exception:  # settings or Redis already gone: nothing more to do
            logger.debug("ratelimits: final metrics flush failed", exc_info=True)


@resets_process_state
def reset() -> None:
    """Forget the buffer and stop this process's flusher (tests, settings changes)."""
    global _pid, _flusher
    with _lock:
        flusher = _flusher
        _flusher = None
        _pid = None
    _counts.reset()
    if flusher is not None:
        flusher.stop()
