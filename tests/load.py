"""The load the drills, the Sentinel failovers and the cluster's growth send while they
break something: client threads that each send requests until told to stop, and record
what every request saw.

A harness subclasses :class:`Load` with the sample it records and what one thread sends
(:meth:`Load.run`, calling :meth:`Load.record`). Every thread first does
:meth:`Load.prepare` (a warm-up), then all start at once; an exception that ends a
thread is kept in :attr:`Load.errors` for the test to assert on. Waiting is by polling
the samples, bounded by a timeout, never by a fixed sleep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, Self, TypeVar

S = TypeVar("S")

#: Seconds the threads get to become ready, and to finish once told to stop.
READY_TIMEOUT = 30.0


class Load(Generic[S]):
    """``threads`` client threads recording samples of type ``S``; a context manager over
    :meth:`start` and :meth:`stop`."""

    def __init__(self, threads: int, *, stop_timeout: float = 30.0) -> None:
        self.threads = threads
        #: Seconds :meth:`stop` waits for each thread.
        self.stop_timeout = stop_timeout
        #: What ended a thread early, in the order it happened.
        self.errors: list[BaseException] = []
        self._samples: list[S] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Barrier(threads + 1)
        self._threads = [
            threading.Thread(target=self._thread, args=(n,), daemon=True) for n in range(threads)
        ]

    def prepare(self, thread: int) -> None:
        """What thread ``thread`` does before the load starts (nothing here)."""

    def run(self, thread: int) -> None:
        """What thread ``thread`` sends, checking :attr:`stopping` between requests."""
        raise NotImplementedError

    def finish(self, thread: int) -> None:
        """What thread ``thread`` does as it ends, however it ends (nothing here)."""

    def record(self, sample: S) -> None:
        """Keep ``sample`` (thread-safe)."""
        with self._lock:
            self._samples.append(sample)

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called: each thread ends at its next check."""
        return self._stop.is_set()

    def snapshot(self) -> list[S]:
        """The samples recorded so far, in order."""
        with self._lock:
            return list(self._samples)

    def start(self) -> Self:
        """Start the threads, and return once every one has prepared."""
        for thread in self._threads:
            thread.start()
        self._ready.wait(timeout=READY_TIMEOUT)
        return self

    def stop(self) -> list[S]:
        """Tell the threads to stop, wait for them (a thread that hangs fails the test);
        every sample."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.stop_timeout)
        assert not any(t.is_alive() for t in self._threads), "a client thread hung"
        return self.snapshot()

    def join(self, timeout: float) -> None:
        """Wait (``timeout`` seconds a thread at most) for the threads to end by themselves."""
        for thread in self._threads:
            thread.join(timeout=timeout)

    def first(self, found: Callable[[S], bool], timeout: float) -> S | None:
        """Poll until a sample satisfies ``found``; that sample, else None after
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            samples = self.snapshot()
            for sample in samples[seen:]:
                if found(sample):
                    return sample
            seen = len(samples)
            time.sleep(0.01)
        return None

    def wait_count(self, found: Callable[[S], bool], count: int, timeout: float) -> bool:
        """Poll until ``count`` samples satisfy ``found``; False if they did not within
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while sum(map(found, self.snapshot())) < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _thread(self, thread: int) -> None:
        try:
            self.prepare(thread)
            self._ready.wait(timeout=READY_TIMEOUT)
            self.run(thread)
        except BaseException as e:
            self._ready.abort()  # a thread that failed to prepare fails the start at once
            with self._lock:
                self.errors.append(e)
        finally:
            self.finish(thread)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
