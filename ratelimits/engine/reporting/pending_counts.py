"""Counts a process keeps until they are added to Redis hashes in one round trip: the
dashboard's per-minute counts (:mod:`~.stats`) and the traffic record's per-hour ones
(:mod:`ratelimits.engine.traffic.record`) are each a :class:`PendingCounts`.

A count is ``(period, policy, field) -> n``, ``period`` a whole number of
``period_seconds`` since the epoch. The request path adds to :attr:`PendingCounts.counts`
holding :attr:`PendingCounts.lock`: no I/O. :meth:`PendingCounts.flush` sends them in
one pipelined round trip::

    HINCRBY <hash> <field> <n>      (for each count)
    EXPIRE  <hash> <key_ttl>        (for each hash touched)

through the limiter's client and its circuit breaker (the newest hash's breaker stands for
them all: a flush is sent or kept whole). Counts that could not be sent are put back for
the next flush, unless :meth:`~PendingCounts.reset` ran meanwhile; those of periods more
than ``max_age`` periods old are dropped with a warning, so a dead Redis cannot grow the
buffer without bound. A count the server refuses for now (a replica after a failover, a
full or busy server) is kept and the breaker told; one it refuses for its key
(``WRONGTYPE``: a foreign value there) is dropped and logged. Delivery is at least once:
a flush that Redis applied but whose reply was lost is sent again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ratelimits.conf import app_settings
from ratelimits.engine.store import breaker as breakers
from ratelimits.engine.store import connection, errors
from ratelimits.engine.store import route as routes
from ratelimits.exceptions import ConfigurationError

logger = logging.getLogger("ratelimits")

#: ``(period, policy, field)``.
Entry = tuple[int, str, str]
#: Where a count is added: ``(hash key, field)`` for an entry, given the key prefix.
Place = Callable[[Entry, str], tuple[str, str]]


class PendingCounts:
    """Counts of ``what`` (``"request counts"``) by period of ``period_seconds`` (named
    ``period_name``), kept until a flush adds them where ``place`` says; a hash lives
    ``key_ttl`` seconds after its last write, and counts more than ``max_age`` periods
    old are dropped."""

    def __init__(
        self,
        *,
        what: str,
        period_seconds: int,
        period_name: str,
        max_age: int,
        key_ttl: int,
        place: Place,
    ) -> None:
        self.what = what
        self.period_seconds = period_seconds
        self.period_name = period_name
        self.max_age = max_age
        self.key_ttl = key_ttl
        self.place = place
        #: Held while :attr:`counts` is read or added to.
        self.lock = threading.Lock()
        #: The counts not yet sent; replaced whole by a flush (read it holding the lock).
        self.counts: dict[Entry, int] = {}
        self._flush_lock = threading.Lock()  # one flush at a time
        self._generation = 0  # bumped by reset(): a flush in flight must not refill

    def period(self, now: float | None = None) -> int:
        """The period holding ``now`` (seconds since the epoch; ``None``: this machine's)."""
        return int((time.time() if now is None else now) // self.period_seconds)

    def pending(self) -> dict[Entry, int]:
        """A copy of the counts not yet sent."""
        with self.lock:
            return dict(self.counts)

    def flush(self, *, now: float | None = None) -> bool:
        """Send the counts in one pipelined round trip. True when nothing is left to
        send; False when some were kept for the next flush (Redis unavailable, its
        breaker open, a refusal for now). Never raises a Redis error. ``now`` decides
        which periods are too old (tests)."""
        with self._flush_lock:
            return self._flush(time.time() if now is None else now)

    def reset(self) -> None:
        """Forget every count, and any a flush in flight would put back."""
        with self.lock:
            self.counts = {}
            self._generation += 1

    def after_fork(self) -> None:
        """In a forked child: new locks (a thread of the parent may have held one at the
        fork), and no counts (they are the parent's to send)."""
        self.lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self.counts = {}

    def _flush(self, now: float) -> bool:
        with self.lock:
            self._drop_old(now)
            if not self.counts:
                return True
            batch, self.counts = self.counts, {}
            generation = self._generation
        entries = sorted(batch.items())
        prefix = app_settings.KEY_PREFIX
        places = [self.place(entry, prefix) for entry, _ in entries]
        try:
            route = routes.current()
            breaker = route.guard(places[-1][0])  # the newest period's hash
        except ConfigurationError as e:
            breakers.breaker.failure(e)
            self._put_back(batch, generation, now)
            return False
        except routes.BreakerOpen:
            self._put_back(batch, generation, now)
            return False
        try:
            pipe = route.client.pipeline(transaction=False)
            for (key, field), (_, n) in zip(places, entries, strict=True):
                pipe.hincrby(key, field, n)
            for key in dict.fromkeys(key for key, _ in places):
                pipe.expire(key, self.key_ttl)
            replies = pipe.execute(raise_on_error=False)
        except connection.REDIS_ERRORS as e:
            breaker.failure(e)
            logger.debug("ratelimits: %s not sent (%s); %d kept", self.what, e, len(batch))
            self._put_back(batch, generation, now)
            return False
        retry: dict[Entry, int] = {}
        refused: Exception | None = None
        for (entry, n), (key, field), reply in zip(entries, places, replies, strict=False):
            if isinstance(reply, Exception) and errors.code_of(reply) is not None:
                retry[entry] = n  # refused for now, not for this key: sent again
                refused = reply
            elif isinstance(reply, Exception):
                logger.error(
                    "ratelimits: could not add %d to %s of %s (%s); dropped.", n, field, key, reply
                )
        if refused is not None:
            breaker.failure(refused)
            self._put_back(retry, generation, now)
            return False
        breaker.success()
        return True

    def _put_back(self, batch: dict[Entry, int], generation: int, now: float) -> None:
        with self.lock:
            if generation != self._generation:
                return  # reset() ran meanwhile: these counts belong to a forgotten state
            counts = self.counts
            for entry, n in batch.items():
                counts[entry] = counts.get(entry, 0) + n
            self._drop_old(now)

    def _drop_old(self, now: float) -> None:
        """Drop the counts of periods too old to send (call holding :attr:`lock`)."""
        oldest = self.period(now) - self.max_age
        old = [entry for entry in self.counts if entry[0] < oldest]
        if old:
            lost = sum(self.counts.pop(entry) for entry in old)
            logger.warning(
                "ratelimits: dropped %d %s older than %d %ss that could not be sent to Redis.",
                lost,
                self.what,
                self.max_age,
                self.period_name,
            )
