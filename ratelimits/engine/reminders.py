"""Warnings about a misconfiguration that lasts, said again while it lasts.

A warning logged once per process is lost on whoever reads the log from its second
minute on. A :class:`Reminder` lets each of its keys (a policy's name, a view's, a
setting's) be said at most once every ``interval`` seconds (:data:`INTERVAL`) instead.

Its memory is bounded: several keys are names that requests choose among, so once
``size`` keys were said in the last interval, a new key waits until one of them is
forgotten (an interval after it was said). A reminder thus writes at most ``size`` lines
an interval, whatever comes. Every call takes a lock: reminders sit on the paths that
warn, never on a request's usual path.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

#: Seconds between two lines about the same thing.
INTERVAL = 60.0

#: Keys a reminder remembers at most.
SIZE = 1000


class Reminder:
    """Says when each key is due again: at most once every ``interval`` seconds of
    ``clock`` (monotonic; tests pass their own)."""

    def __init__(
        self,
        interval: float = INTERVAL,
        *,
        size: int = SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.size = size
        self.clock = clock
        self._lock = threading.Lock()
        #: When each key was last said, oldest first.
        self._said: OrderedDict[Hashable, float] = OrderedDict()

    def due(self, key: Hashable) -> bool:
        """True, and noted, when ``key`` was not said in the last interval and there is
        room for it; False otherwise."""
        with self._lock:
            now = self.clock()
            self._forget_said_before(now - self.interval)
            if key in self._said or len(self._said) >= self.size:
                return False
            self._said[key] = now
            return True

    def clear(self) -> None:
        """Forget every key: each is due at once (the settings changed)."""
        with self._lock:
            self._said.clear()

    def _forget_said_before(self, horizon: float) -> None:
        said = self._said
        while said and next(iter(said.values())) <= horizon:
            said.popitem(last=False)
