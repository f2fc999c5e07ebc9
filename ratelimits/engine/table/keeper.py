"""The thread that checks and rebuilds this process's policy table in the background.

One daemon thread per process, started at its first job and then waiting on a queue,
holding no GIL, for the next (a thread stuck in a build that hangs is left to it, and a
new one takes the next jobs). A thread started per check would cost the request that
starts it a few hundred microseconds on a busy core: ``Thread.start()`` waits until the
new thread has run, and it then holds the GIL until its first socket call. Handing a job
to a waiting thread costs the request a queue put.

A fork leaves the child with no thread and a fresh queue: its first job starts one.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable

logger = logging.getLogger("ratelimits")

#: The keeper thread's name.
THREAD_NAME = "ratelimits-policy-table"


class Keeper:
    """Runs the jobs handed to it, one at a time, in order, in one daemon thread."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        #: The queue of the thread that takes the next job (``None``: none started yet).
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] | None = None
        self._pending = 0
        self._idle = threading.Event()
        self._idle.set()

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` in the keeper thread, after the jobs handed over before it.
        Raises :class:`RuntimeError` when no thread can be started (the interpreter is
        shutting down)."""
        with self._lock:
            if self._jobs is None:
                jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
                thread = threading.Thread(
                    target=self._run, args=(jobs,), name=THREAD_NAME, daemon=True
                )
                thread.start()
                self._jobs = jobs
            self._pending += 1
            self._idle.clear()
            self._jobs.put(job)

    def abandon(self) -> None:
        """Leave the thread to the job it is stuck in (it ends when that job does) and
        hand the next jobs to a new thread: a build that hangs (a database that does not
        answer) must not hold back the checks after it."""
        with self._lock:
            if self._jobs is not None:
                self._jobs.put(None)
                self._jobs = None

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every job handed over has run; ``False`` if ``timeout`` ran out."""
        return self._idle.wait(timeout)

    def _run(self, jobs: queue.SimpleQueue[Callable[[], None] | None]) -> None:
        while (job := jobs.get()) is not None:
            try:
                job()
            except Exception:  # never let the thread die: the next check tries again
                logger.exception("ratelimits: a background policy-table job failed")
            finally:
                with self._lock:
                    self._pending -= 1
                    if not self._pending:
                        self._idle.set()


#: This process's keeper.
keeper = Keeper()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=keeper._reset)
