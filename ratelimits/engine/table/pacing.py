"""Long work in a background thread, done in short slices so that requests keep the GIL.

A thread that computes holds the GIL until another thread has waited for it for
``sys.getswitchinterval()`` (5 ms): a request that needs it back after a Redis reply
would wait that long, once per socket call. A :class:`Pacer` makes the worker hand the
GIL over itself: at each :meth:`~Pacer.tick` after :data:`SLICE` seconds of work it
sleeps :data:`PAUSE` seconds, and a request waiting for the GIL takes it then. A request
waits at most a slice per socket call; the work takes a little longer.

Code the paced work calls without being handed the pacer (the policy table's source)
marks the points between its costly steps with :func:`pause`, which ticks the pacer
:func:`paced_by` made current in this thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

#: Seconds of work between two pauses.
SLICE = 0.0001
#: Seconds of each pause (the OS may sleep a little longer).
PAUSE = 0.00002


class Pacer:
    """Pauses after ``every`` seconds of work, for ``pause`` seconds."""

    __slots__ = ("_since", "every", "pause")

    def __init__(self, every: float = SLICE, pause: float = PAUSE) -> None:
        self.every = every
        self.pause = pause
        self._since = time.perf_counter()

    def tick(self) -> None:
        """Call between two small steps of the work: pauses when a slice is over."""
        if time.perf_counter() - self._since >= self.every:
            time.sleep(self.pause)
            self._since = time.perf_counter()

    def rest(self) -> None:
        """Pause now (at the start of the work: the thread that started it goes on)."""
        time.sleep(self.pause)
        self._since = time.perf_counter()

    def paced(self, items: Iterable[T]) -> Iterator[T]:
        """``items``, with a :meth:`tick` after each."""
        for item in items:
            yield item
            self.tick()


class Unpaced(Pacer):
    """Never pauses: work a request waits for anyway (a worker's first table)."""

    __slots__ = ()

    def tick(self) -> None:
        pass

    def rest(self) -> None:
        pass

    def paced(self, items: Iterable[T]) -> Iterator[T]:
        return iter(items)


#: The pacer of work done in the request's thread.
UNPACED = Unpaced()


_current = threading.local()


@contextmanager
def paced_by(pacer: Pacer) -> Iterator[Pacer]:
    """Make ``pacer`` the one :func:`pause` ticks in this thread, for the block."""
    before = getattr(_current, "pacer", UNPACED)
    _current.pacer = pacer
    try:
        yield pacer
    finally:
        _current.pacer = before


def pause() -> None:
    """A point between two costly steps: ticks this thread's current pacer (none, outside
    :func:`paced_by`)."""
    getattr(_current, "pacer", UNPACED).tick()
