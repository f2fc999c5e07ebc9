"""The in-process policy table, kept current: which policies match a request (the index,
:mod:`ratelimits.engine.matching`) with no database query.

Each worker keeps the enabled policies compiled in memory. At most every
``POLICY_REFRESH_INTERVAL`` seconds a request checks a version stamp in Redis (one
``GET``, amortised over every request in that interval); when the stamp moved, or the
table is older than ``POLICY_MAX_AGE``, a new table is built from the source (the
database: :mod:`ratelimits.policy_source`, which ``AppConfig.ready()`` plugs in with
:func:`set_source`) in a background thread, one build at a time, and swapped in whole
when ready: requests meanwhile are served the table held, and none waits for the
database. A committed change, and a reset of counters, writes a new random stamp
(:func:`mark_changed`, called by :mod:`ratelimits.signals`), so every worker enforces it
within ``POLICY_REFRESH_INTERVAL`` seconds and the build's time, even after Redis lost
its data; the process that made the change starts its background build at once.

A build is cheap and paced. The source compiles only the policies changed since its
previous load, and a new table re-indexes only those, sharing the rest with the table
held; the background thread gives the GIL away between small steps
(:mod:`ratelimits.engine.pacing`), so a request never waits long for a build in its own
process. A request builds the table itself only when none is fit to serve: a worker's
first request, and an idle worker's check (none for two intervals: its table may be any
age). Seeing the stamp move, and swapping a new table in, forget the over-limit keys the
worker remembers (:mod:`ratelimits.engine.denials`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from asgiref.sync import sync_to_async
from django.core.signals import setting_changed

from ratelimits.conf import app_settings
from ratelimits.engine.denials import clear as clear_denials
from ratelimits.engine.keys import version_key
from ratelimits.engine.matching import PolicyTable
from ratelimits.engine.pacing import UNPACED, Pacer, paced_by
from ratelimits.engine.policy import CompiledPolicy
from ratelimits.engine.store import breaker as breakers
from ratelimits.engine.store import connection
from ratelimits.engine.store import route as routes
from ratelimits.exceptions import ConfigurationError

logger = logging.getLogger("ratelimits")

#: What the table is loaded from: a callable returning the enabled policies, compiled.
PolicySource = Callable[[], Iterable[CompiledPolicy]]


def _no_source() -> Iterable[CompiledPolicy]:
    raise ConfigurationError(
        "ratelimits has no policy source: add 'ratelimits' to INSTALLED_APPS "
        "(its AppConfig.ready() connects the database)."
    )


def _nothing_to_release() -> None:
    pass


_source: PolicySource = _no_source
_release_thread: Callable[[], None] = _nothing_to_release
_in_background = True


def set_source(
    source: PolicySource,
    release: Callable[[], None] = _nothing_to_release,
    *,
    in_background: bool = True,
) -> None:
    """Load the table from ``source`` from now on (and drop the one held).

    ``release`` is called in a background build's thread when the build is over, to free
    what the source holds per thread (the database source closes that thread's
    connection). With ``in_background=False`` every build runs in the request's thread:
    for a source other threads cannot read (a test's database, whose rows live in the
    test thread's open transaction)."""
    global _source, _release_thread, _in_background
    _source, _release_thread, _in_background = source, release, in_background
    reset()


class _TableCache:
    """This process's table, when it was checked and built, and the build under way.

    ``lock`` guards every field. A request reads ``table`` without it, once: a new table
    replaces the reference whole, so a request has either the old table or the new one.
    Builds are numbered as they start; a table is swapped in only over one whose build
    started earlier (and so read the source earlier), and a drop refuses every build
    under way."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.table: PolicyTable | None = None
        #: The version stamp the table was built for.
        self.version: bytes | None = None
        self.checked_at = 0.0
        #: When the check that started the table's build ran.
        self.loaded_at = 0.0
        self.builds_started = 0
        #: The number of the build that made ``table``; after a drop, the last number
        #: handed out (every build up to it is refused).
        self.built = 0
        #: The background build under way (its number), and when it started.
        self.building: int | None = None
        self.building_since = 0.0
        #: A build asked for while one was under way, which may have read the source
        #: before the change: its version stamp and check time. The thread of the build
        #: under way starts it when done.
        self.rebuild: tuple[bytes | None, float] | None = None

    def fresh_table(self, now: float) -> PolicyTable | None:
        """The table when it needs no check now, else ``None``. The table is read once:
        another thread may drop it (``reset``, ``mark_changed``) at any moment."""
        table = self.table
        interval = float(app_settings.POLICY_REFRESH_INTERVAL)
        return table if table is not None and now - self.checked_at < interval else None

    def start_build(self) -> int:
        """Number a build about to read the source."""
        self.builds_started += 1
        return self.builds_started

    def swap_in(self, build: int, table: PolicyTable, version: bytes | None, at: float) -> bool:
        """Hold ``table`` from now on, unless a later build's table, or a drop, came first."""
        if build <= self.built:
            return False
        self.table, self.version, self.loaded_at, self.built = table, version, at, build
        return True

    def drop(self) -> None:
        """Hold no table: the next request builds one; builds under way are refused."""
        self.table = None
        self.built = self.builds_started
        self.rebuild = None

    def build_under_way(self, now: float) -> bool:
        """A background build is running (one running past ``POLICY_MAX_AGE`` is given up
        on, so that a hung database cannot freeze the table for good)."""
        max_age = float(app_settings.POLICY_MAX_AGE)
        return self.building is not None and now - self.building_since < max_age


_cache = _TableCache()


def get_table() -> PolicyTable:
    """The current table.

    At most every ``POLICY_REFRESH_INTERVAL`` a request checks the version stamp; when it
    moved, or the table is older than ``POLICY_MAX_AGE``, a new table is built in a
    background thread and swapped in when ready, while this request and the next ones
    are served the table held. The table is built here, before returning, only when
    there is none (the first request) or when the previous check is more than two
    intervals old (an idle worker)."""
    now = time.monotonic()
    table = _cache.fresh_table(now)
    if table is not None:
        return table
    with _cache.lock:
        table = _cache.fresh_table(now)  # another thread checked while this one waited
        if table is None:
            held = _cache.table
            if held is None:
                table = _build_here(_read_version(_cache.version), now)
            else:
                table = _check(held, now)
        return table


async def aget_table() -> PolicyTable:
    """:func:`get_table` for coroutines. The table held is returned at once; the
    periodic check (a Redis read, at most every ``POLICY_REFRESH_INTERVAL``) and any
    build run in a worker thread, where the database may be used."""
    table = _cache.fresh_table(time.monotonic())
    if table is not None:
        return table
    return await sync_to_async(get_table)()


def _check(held: PolicyTable, now: float) -> PolicyTable:
    """The periodic check, the lock held: the table to serve. When the stamp moved, or
    ``held`` is too old, a background build starts (unless one is under way); an idle
    worker's table, of unknown age, is rebuilt here instead, and until then the other
    requests wait for this check too (the table does not look checked)."""
    on_time = now - _cache.checked_at < 2 * float(app_settings.POLICY_REFRESH_INTERVAL)
    if on_time:  # the other requests are served the table held meanwhile
        _cache.checked_at = now
    if _cache.build_under_way(now):
        _cache.checked_at = now
        return held
    version = _read_version(_cache.version)
    moved = version != _cache.version
    if moved:
        # Counters may have been reset, or Redis lost them: the denials go now, not when
        # the new table is ready (and again then: a limit may have changed).
        clear_denials()
    if not moved and now - _cache.loaded_at < float(app_settings.POLICY_MAX_AGE):
        _cache.checked_at = now
        return held
    if _in_background and on_time:
        _start_background_build(version, now)
        return held
    return _build_here(version, now, held)


def _build_here(version: bytes | None, now: float, held: PolicyTable | None = None) -> PolicyTable:
    """Build the table in this thread, the lock held. With no ``held`` table a failure is
    the request's (there is nothing to serve with); otherwise it is logged and ``held``
    is served."""
    build = _cache.start_build()
    if held is None:
        table = load_table()
    else:
        rebuilt = _load_or_warn()
        if rebuilt is None:
            _cache.checked_at = now
            return held
        table = rebuilt
    _cache.swap_in(build, table, version, now)
    _cache.checked_at = now  # after the swap: a request seeing it checked gets this table
    clear_denials()  # a limit may have changed, or counters were reset
    return table


def _rebuild_in_background(version: bytes | None, now: float) -> None:
    """Build the table for ``version`` in the background, the lock held: now, or right
    after the build under way (which may have read the source before the change)."""
    if _cache.build_under_way(now):
        _cache.rebuild = (version, now)
    else:
        _start_background_build(version, now)


def _start_background_build(version: bytes | None, now: float) -> None:
    """Start building the table for ``version`` in a daemon thread, the lock held."""
    build = _cache.start_build()
    thread = threading.Thread(
        target=_build_in_background,
        args=(build, version, now),
        name="ratelimits-policy-table",
        daemon=True,
    )
    _cache.building, _cache.building_since = build, now
    try:
        thread.start()
    except RuntimeError as e:  # no thread to be had: the next check tries again
        _cache.building = None
        logger.warning("ratelimits: could not start rebuilding the policy table (%s).", e)


def _build_in_background(build: int, version: bytes | None, checked_at: float) -> None:
    """The background thread: build the table, paced (:mod:`ratelimits.engine.pacing`),
    and swap it in; then the rebuild asked for meanwhile, if any. A failure keeps the
    table in use; the next check tries again (the stamp still differs from the one held,
    or the table is still too old)."""
    try:
        while True:
            with paced_by(Pacer()) as pacer:
                pacer.rest()  # the thread that started this one goes on first
                table = _load_or_warn(pacer)
            with _cache.lock:
                swapped = table is not None and _cache.swap_in(build, table, version, checked_at)
                after = _next_build(build)
            if swapped:
                clear_denials()  # a limit may have changed, or counters were reset
            if after is None:
                return
            build, version, checked_at = after
    finally:
        with _cache.lock:
            if _cache.building == build:
                _cache.building = None
        _release_thread()


def _next_build(done: int) -> tuple[int, bytes | None, float] | None:
    """The lock held, build ``done`` over: the rebuild asked for meanwhile, numbered and
    under way, or ``None`` (none was, or ``done`` was given up on or reset)."""
    if _cache.building != done:
        return None
    if _cache.rebuild is None:
        _cache.building = None
        return None
    (version, checked_at), _cache.rebuild = _cache.rebuild, None
    build = _cache.start_build()
    _cache.building, _cache.building_since = build, time.monotonic()
    return build, version, checked_at


def load_table(pacer: Pacer = UNPACED) -> PolicyTable:
    """A new table from the source (the enabled policies and their overrides), built
    with the table held (whose globs' matchers it reuses)."""
    return PolicyTable(_source(), previous=_cache.table, pacer=pacer)


def _load_or_warn(pacer: Pacer = UNPACED) -> PolicyTable | None:
    """A new table, or ``None`` (logged) when the source fails."""
    try:
        return load_table(pacer)
    except Exception as e:
        logger.warning(
            "ratelimits: could not rebuild the policy table (%s: %s); requests keep the "
            "one in use, and the next check tries again.",
            type(e).__name__,
            e,
        )
        return None


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
    stamp = _announce()
    now = time.monotonic()
    with _cache.lock:
        if _in_background and _cache.table is not None:
            _rebuild_in_background(_cache.version if stamp is None else _as_read(stamp), now)
        else:
            _cache.drop()


def _announce() -> str | None:
    """Write a new version stamp; ``None`` (logged) when Redis cannot take it."""
    try:
        # A fresh random stamp, not a counter: after Redis lost its data a counter would
        # start again at 1, a value a worker may already hold, and that worker would miss
        # the change until POLICY_MAX_AGE.
        stamp = uuid.uuid4().hex
        connection.get_client().set(version_key(app_settings.KEY_PREFIX), stamp)
    except (*connection.REDIS_ERRORS, ConfigurationError) as e:
        logger.warning(
            "ratelimits: could not announce a policy change to other workers (%s); "
            "they pick it up within POLICY_MAX_AGE (%s s).",
            e,
            app_settings.POLICY_MAX_AGE,
        )
        return None
    return stamp


def _as_read(stamp: str) -> Any:
    """``stamp`` as the client reads it back: ``str`` from a client that decodes replies
    (the version held is then a ``str``), else ``bytes``."""
    return stamp if isinstance(_cache.version, str) else stamp.encode()


def reset() -> None:
    """Forget the table (tests, settings changes); the next request loads it again."""
    with _cache.lock:
        _cache.drop()
        _cache.building = None  # a build still running is refused, and not waited for
        _cache.version = None
        _cache.checked_at = _cache.loaded_at = 0.0
    clear_denials()


def _read_version(known: bytes | None) -> bytes | None:
    """The version stamp in Redis; ``known`` when Redis cannot answer.

    A missing stamp is written (a random one, unless another worker wrote one first): the
    stamp then disappears only when Redis loses its data, and every worker notices that
    as a change, reloads and forgets the denials it remembers for counts that are gone."""
    key = version_key(app_settings.KEY_PREFIX)
    try:
        route = routes.current()
        guard = route.guard(key, writes=False)  # an open breaker's try is a decide call's
    except (connection.Unreachable, routes.BreakerOpen):  # the breaker logs its opening
        return known
    except ConfigurationError as e:
        breakers.breaker.failure(e)
        return known
    client = route.client
    try:
        version = client.get(key)
        wrote = version is None
        if wrote:
            client.set(key, uuid.uuid4().hex, nx=True)
            version = client.get(key)
    except connection.REDIS_ERRORS as e:
        guard.failure(e)
        return known
    if wrote:
        guard.success()
    else:  # a read answered: not proof that Redis takes writes (a full one reads)
        guard.read_success()
    return version


def _reset_on_setting_change(*, setting: str, **kwargs: Any) -> None:
    if setting in ("RATELIMITS", "CACHES"):
        reset()


setting_changed.connect(_reset_on_setting_change, dispatch_uid="ratelimits.engine.table")


def _after_fork_in_child() -> None:
    # A thread of the parent may have held the lock, and its build does not run here.
    _cache.lock = threading.Lock()
    _cache.building = None
    _cache.rebuild = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
