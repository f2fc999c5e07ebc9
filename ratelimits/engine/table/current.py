"""The in-process policy table, kept current: which policies match a request (the index,
:mod:`ratelimits.engine.table.policy_table`) with no database query.

Each worker keeps the enabled policies compiled in memory. At most every
``POLICY_REFRESH_INTERVAL`` seconds a request hands a check to the worker's keeper thread
(:mod:`~ratelimits.engine.table.keeper`) and goes on with the table held. The check reads
a version stamp in Redis (one ``GET``, amortised over every request in that interval);
when the stamp moved, or the table is older than ``POLICY_MAX_AGE``, the keeper builds a
new table from the source (the database: :mod:`ratelimits.database.policy_source`, which
``AppConfig.ready()`` plugs in with :func:`set_source`), one build at a time, and swaps
it in whole when ready: requests meanwhile are served the table held, and none waits for
Redis or the database. A committed change, and a reset of counters, writes a new random
stamp (:func:`mark_changed`, called by :mod:`ratelimits.database.announcements`), so every
worker enforces it within ``POLICY_REFRESH_INTERVAL`` seconds and the build's time, even
after Redis lost its data; the process that made the change starts its build at once.

A build is cheap and paced. The source compiles only the policies changed since its
previous load, and a new table re-indexes only those, sharing the rest with the table
held; the keeper thread gives the GIL away between small steps
(:mod:`ratelimits.engine.table.pacing`), so a request never waits long for a build in its own
process. A request builds the table itself only when none is fit to serve: a worker's
first request, and an idle worker's check (none for two intervals: its table may be any
age). Seeing the stamp move, and swapping a new table in, forget the over-limit keys the
worker remembers (:mod:`ratelimits.engine.denials`).

This module decides when to check and when to build; the table held lives in
:mod:`~ratelimits.engine.table.cache`, the stamp in :mod:`~ratelimits.engine.table.version`
and the builds in :mod:`~ratelimits.engine.table.builds`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from asgiref.sync import sync_to_async

import ratelimits.engine.table.builds as builds
from ratelimits.conf import app_settings, resets_on_setting_change
from ratelimits.engine.denials import clear as clear_denials
from ratelimits.engine.table.builds import PolicySource, load_table
from ratelimits.engine.table.cache import cache
from ratelimits.engine.table.policy_table import PolicyTable
from ratelimits.engine.table.version import announce, as_read, read_version

__all__ = [
    "PolicySource",
    "PolicyTable",
    "aget_table",
    "get_table",
    "load_table",
    "mark_changed",
    "reset",
    "set_source",
]


def set_source(
    source: PolicySource,
    release: Callable[[], None] = builds.nothing_to_release,
    *,
    in_background: bool = True,
) -> None:
    """Load the table from ``source`` from now on (and drop the one held).

    ``release`` is called in a background build's thread when the build is over, to free
    what the source holds per thread (the database source closes that thread's
    connection). With ``in_background=False`` every build runs in the request's thread:
    for a source other threads cannot read (a test's database, whose rows live in the
    test thread's open transaction)."""
    builds.use(source, release, in_background=in_background)
    reset()


def get_table() -> PolicyTable:
    """The current table.

    At most every ``POLICY_REFRESH_INTERVAL`` a request hands the keeper thread a check of
    the version stamp; when it moved, or the table is older than ``POLICY_MAX_AGE``, the
    keeper builds a new table and swaps it in when ready, while this request and the next
    ones are served the table held. The table is built here, before returning, only when
    there is none (the first request) or when the previous check is more than two
    intervals old (an idle worker)."""
    now = time.monotonic()
    table = cache.fresh_table(now)
    if table is not None:
        return table
    with cache.lock:
        table = cache.fresh_table(now)  # another thread checked while this one waited
        if table is None:
            held = cache.table
            if held is None:
                table = builds.build_here(read_version(cache.version), now)
            else:
                table = _check(held, now)
        return table


async def aget_table() -> PolicyTable:
    """:func:`get_table` for coroutines. The table held is returned at once, and a due
    check is handed to the keeper thread from the loop. Only a build the request must
    wait for (a worker's first table, an idle worker's) runs in a worker thread, where
    the database may be used."""
    now = time.monotonic()
    table = cache.fresh_table(now)
    if table is not None:
        return table
    table = _check_without_waiting(now)
    if table is not None:
        return table
    return await sync_to_async(get_table)()


def _check_without_waiting(now: float) -> PolicyTable | None:
    """The table to serve when the check due needs no I/O in this thread (it is handed to
    the keeper thread, or a build is under way); ``None`` when the caller must wait in a
    thread that may: no table yet, an idle worker, a source only the request's thread
    may read, or the lock held by another thread (which may be building)."""
    if not cache.lock.acquire(blocking=False):
        return None
    try:
        table = cache.fresh_table(now)
        if table is not None:
            return table
        held = cache.table
        handed_over = builds.in_background() and _on_time(now)
        if held is None or not (handed_over or cache.build_under_way(now)):
            return None
        return _check(held, now)
    finally:
        cache.lock.release()


def _on_time(now: float) -> bool:
    """The previous check is less than two intervals old (the worker was not idle)."""
    return now - cache.checked_at < 2 * float(app_settings.POLICY_REFRESH_INTERVAL)


def _check(held: PolicyTable, now: float) -> PolicyTable:
    """The periodic check, the lock held: the table to serve. On time, the check is
    handed to the keeper thread, which reads the stamp and builds a new table when it
    moved or ``held`` is too old; this request and the next ones are served ``held``. An
    idle worker's table, of unknown age, is checked and rebuilt here instead, and until
    then the other requests wait for this check too (the table does not look checked)."""
    on_time = _on_time(now)
    if on_time:  # the other requests are served the table held meanwhile
        cache.checked_at = now
    if cache.build_under_way(now):
        cache.checked_at = now
        return held
    if builds.in_background() and on_time:
        builds.start_background_check(cache.version, now)
        return held
    version, due = builds.read_stamp(cache.version, now)
    if not due:
        cache.checked_at = now
        return held
    return builds.build_here(version, now, held)


def mark_changed() -> None:
    """A policy changed, or counters were reset: forget this process's remembered
    denials, bump the version other workers watch, and rebuild this process's table.

    The table is rebuilt in the background, paced, as other workers rebuild theirs when
    they see the stamp move (:func:`get_table`): requests are served the table held until
    the new one is swapped in, never a build on a request's thread. A build under way may
    have read the source before the change: another follows it. With no table held, or a
    source only the request's thread can read (``set_source(in_background=False)``), the
    table is dropped instead and the next request builds it."""
    clear_denials()
    stamp = announce()
    now = time.monotonic()
    with cache.lock:
        if builds.in_background() and cache.table is not None:
            version = cache.version if stamp is None else as_read(stamp, cache.version)
            builds.rebuild_in_background(version, now)
        else:
            cache.drop()


@resets_on_setting_change("RATELIMITS", "CACHES")
def reset() -> None:
    """Forget the table (tests, settings changes); the next request loads it again."""
    with cache.lock:
        cache.drop()
        cache.building = None  # a build still running is refused, and not waited for
        cache.version = None
        cache.checked_at = cache.loaded_at = 0.0
    clear_denials()
