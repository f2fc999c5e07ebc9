"""The sign-in audit trail's writer: records kept in memory on the request path, written to
the database by a thread of each process, in batches.

:func:`record` takes a lock and appends to a list: no I/O, no query, nothing the request
waits for. A daemon thread per process (started by the first :func:`record`, and again in
a forked child, whose inherited records are the parent's to write) writes what is pending
every ``SIGN_IN_AUDIT_FLUSH_INTERVAL`` seconds, or as soon as :data:`BATCH` records wait,
with one ``bulk_create`` per :data:`BATCH`, and what is left when the interpreter exits.
The buffer is bounded: past :data:`MAX_PENDING` records (a database down for long under a
flood of attempts) the oldest are dropped, counted and logged, so memory stays bounded.
A batch the database refuses is kept for the next flush (and counts towards that bound).

Old records are deleted by :func:`cleanup` (``manage.py ratelimits audit-cleanup``), after
``SIGN_IN_AUDIT_RETENTION`` days.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import DatabaseError, close_old_connections
from django.utils import timezone

from ratelimits.conf import app_settings, resets_process_state
from ratelimits.models import SignInAttempt

logger = logging.getLogger("ratelimits")

#: Records written per ``INSERT``; this many pending wake the writer before its interval.
BATCH = 500
#: Most records a process keeps unwritten; older ones are dropped past it.
MAX_PENDING = 10_000


@dataclass(frozen=True, slots=True)
class Entry:
    """One attempt as the request saw it (the fields of :class:`SignInAttempt`)."""

    when: datetime
    username: str
    address: str
    user_agent: str
    path: str
    result: str
    policy: str = ""

    def row(self) -> SignInAttempt:
        """The model instance to write, each text cut to its column."""
        model = SignInAttempt
        return model(
            when=self.when,
            username=self.username[: model.USERNAME_LENGTH],
            address=self.address[:64],
            user_agent=self.user_agent[: model.USER_AGENT_LENGTH],
            path=self.path[: model.PATH_LENGTH],
            result=self.result,
            policy=self.policy[:64],
        )


_lock = threading.Lock()  # guards the state below
_flush_lock = threading.Lock()  # one flush at a time
_pending: list[Entry] = []
_dropped = 0
_pid: int | None = None
_writer: _Writer | None = None
_atexit_registered = False


def record(entry: Entry) -> None:
    """Keep ``entry`` for the writer thread (no I/O)."""
    global _dropped
    if _pid != os.getpid():
        _adopt()
    with _lock:
        _pending.append(entry)
        excess = len(_pending) - MAX_PENDING
        if excess > 0:
            del _pending[:excess]
            _dropped += excess
        wake = len(_pending) >= BATCH
        writer = _writer
    if wake and writer is not None:
        writer.wake.set()


def pending() -> list[Entry]:
    """A copy of the records not written yet."""
    with _lock:
        return list(_pending)


def flush() -> int:
    """Write the pending records now; returns how many were written. A database error is
    logged and the records kept for the next flush."""
    global _dropped
    with _flush_lock:
        with _lock:
            batch = _pending[:]
            _pending.clear()
            dropped, _dropped = _dropped, 0
        if dropped:
            logger.warning(
                "ratelimits: %d sign-in audit records dropped: more than %d were waiting "
                "for the database.",
                dropped,
                MAX_PENDING,
            )
        if not batch:
            return 0
        try:
            SignInAttempt.objects.bulk_create([entry.row() for entry in batch], batch_size=BATCH)
        except DatabaseError as e:
            logger.error(
                "ratelimits: could not write %d sign-in audit records (%s); kept for the "
                "next flush.",
                len(batch),
                e,
            )
            with _lock:
                _pending[:0] = batch[-MAX_PENDING:]
            return 0
        return len(batch)


def cleanup(*, now: datetime | None = None, dry_run: bool = False) -> tuple[int, datetime]:
    """Delete the records older than ``SIGN_IN_AUDIT_RETENTION`` days (only count them
    with ``dry_run``); returns ``(how many, the cut-off)``."""
    cutoff = (now or timezone.now()) - timedelta(days=int(app_settings.SIGN_IN_AUDIT_RETENTION))
    old = SignInAttempt.objects.filter(when__lt=cutoff)
    if dry_run:
        return old.count(), cutoff
    deleted, _ = old.delete()
    return deleted, cutoff


class _Writer(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="ratelimits-sign-in-audit", daemon=True)
        self.stopped = threading.Event()
        self.wake = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.wake.wait(_interval())
            self.wake.clear()
            if self.stopped.is_set():
                break
            try:
                close_old_connections()  # as a request would: CONN_MAX_AGE, broken ones
                flush()
            except Exception:  # never let the thread die: the next interval tries again
                logger.exception("ratelimits: sign-in audit flush failed")

    def stop(self, timeout: float | None = 1.0) -> None:
        self.stopped.set()
        self.wake.set()
        if self is not threading.current_thread() and self.is_alive():
            self.join(timeout)


def _interval() -> float:
    try:
        value = float(app_settings.SIGN_IN_AUDIT_FLUSH_INTERVAL)
    except (TypeError, ValueError):
        return 2.0
    return value if value > 0 else 2.0


def _adopt() -> None:
    """Make this process the owner of the records and start its writer."""
    global _pid, _writer, _atexit_registered
    pid = os.getpid()
    with _lock:
        if _pid == pid:
            return
        _pid = pid
        _writer = _Writer()
        _writer.start()
        if not _atexit_registered:
            atexit.register(_at_exit)
            _atexit_registered = True


def _after_fork_in_child() -> None:
    # A thread of the parent may have held a lock at the fork: the child needs new ones;
    # the records inherited are the parent's to write.
    global _lock, _flush_lock, _pid, _writer, _dropped
    _lock = threading.Lock()
    _flush_lock = threading.Lock()
    _pending.clear()
    _dropped = 0
    _pid = None
    _writer = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _at_exit() -> None:
    """Best effort: write what is left when the interpreter exits."""
    writer = _writer
    if _pid != os.getpid() or writer is None:
        return
    writer.stop(timeout=1.0)
    try:
        flush()
    except Exception:  # settings or the database already gone: nothing more to do
        logger.debug("ratelimits: final sign-in audit flush failed", exc_info=True)


@resets_process_state
def reset() -> None:
    """Forget the pending records and stop this process's writer (tests)."""
    global _pid, _writer, _dropped
    with _lock:
        writer = _writer
        _writer = None
        _pid = None
        _pending.clear()
        _dropped = 0
    if writer is not None:
        writer.stop()
