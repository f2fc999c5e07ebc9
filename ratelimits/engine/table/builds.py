"""Checking and building the policy table: in the request's thread when there is no
table fit to serve, otherwise in this process's keeper thread
(:mod:`~ratelimits.engine.table.keeper`), one build at a time, paced
(:mod:`ratelimits.engine.table.pacing`) and swapped into :data:`~.table_cache.cache` whole.

The source (the database: :mod:`ratelimits.database.policy_source`) is plugged in by
:func:`ratelimits.engine.table.current.set_source`, which calls :func:`use`."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable

from ratelimits.conf import app_settings
from ratelimits.engine.denials import clear as clear_denials
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.table.cache import cache
from ratelimits.engine.table.keeper import keeper
from ratelimits.engine.table.pacing import UNPACED, Pacer, paced_by
from ratelimits.engine.table.policy_table import PolicyTable
from ratelimits.engine.table.version import read_version
from ratelimits.exceptions import ConfigurationError

logger = logging.getLogger("ratelimits")

#: What the table is loaded from: a callable returning the enabled policies, compiled.
PolicySource = Callable[[], Iterable[CompiledPolicy]]


def _no_source() -> Iterable[CompiledPolicy]:
    raise ConfigurationError(
        "ratelimits has no policy source: add 'ratelimits' to INSTALLED_APPS "
        "(its AppConfig.ready() connects the database)."
    )


def nothing_to_release() -> None:
    """The default ``release``: the source holds nothing per thread."""


_source: PolicySource = _no_source
_release_thread: Callable[[], None] = nothing_to_release
_in_background = True


def use(source: PolicySource, release: Callable[[], None], *, in_background: bool) -> None:
    """Build from ``source`` from now on; ``release`` frees what it holds per thread, after
    a background build; ``in_background=False`` keeps every build in the request's thread."""
    global _source, _release_thread, _in_background
    _source, _release_thread, _in_background = source, release, in_background


def in_background() -> bool:
    """Whether the source may be read by a background thread."""
    return _in_background


def load_table(pacer: Pacer = UNPACED) -> PolicyTable:
    """A new table from the source (the enabled policies and their overrides), built
    with the table held (whose globs' matchers it reuses)."""
    return PolicyTable(_source(), previous=cache.table, pacer=pacer)


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


def build_here(version: bytes | None, now: float, held: PolicyTable | None = None) -> PolicyTable:
    """Build the table in this thread, the lock held. With no ``held`` table a failure is
    the request's (there is nothing to serve with); otherwise it is logged and ``held``
    is served."""
    build = cache.start_build()
    if held is None:
        table = load_table()
    else:
        rebuilt = _load_or_warn()
        if rebuilt is None:
            cache.checked_at = now
            return held
        table = rebuilt
    cache.swap_in(build, table, version, now)
    cache.checked_at = now  # after the swap: a request seeing it checked gets this table
    clear_denials()  # a limit may have changed, or counters were reset
    return table


def read_stamp(known: bytes | None, at: float) -> tuple[bytes | None, bool]:
    """``(the version stamp in Redis, a new table is due)``: due when the stamp is not
    ``known`` (the one the table was built for) or the table is older than
    ``POLICY_MAX_AGE`` at ``at``. A moved stamp forgets the remembered denials at once:
    counters may have been reset, or Redis lost them (and again when the new table is
    swapped in: a limit may have changed)."""
    version = read_version(known)
    moved = version != known
    if moved:
        clear_denials()
    return version, moved or at - cache.loaded_at >= float(app_settings.POLICY_MAX_AGE)


def rebuild_in_background(version: bytes | None, now: float) -> None:
    """Build the table for ``version`` in the background, the lock held: now, or right
    after the build under way (which may have read the source before the change)."""
    if cache.build_under_way(now):
        cache.rebuild = (version, now)
    else:
        start_background_build(version, now)


def start_background_build(version: bytes | None, now: float) -> None:
    """Start building the table for ``version`` in the keeper thread, the lock held."""
    _start(_build_in_background, version, now)


def start_background_check(known: bytes | None, now: float) -> None:
    """Start the periodic check in the keeper thread, the lock held: it reads the version
    stamp (``known`` is the one the table was built for) and builds a new table when the
    stamp moved or the table is older than ``POLICY_MAX_AGE``. The request that starts
    it waits for neither the read nor the build."""
    _start(_check_in_background, known, now)


def _start(
    target: Callable[[int, bytes | None, float], None], version: bytes | None, now: float
) -> None:
    """Run ``target(build, version, now)`` in the keeper thread as the build under way."""
    if cache.building is not None:  # a build under way past POLICY_MAX_AGE, given up on
        keeper.abandon()
    build = cache.start_build()
    cache.building, cache.building_since = build, now
    try:
        keeper.submit(functools.partial(target, build, version, now))
    except RuntimeError as e:  # no thread to be had: the next check tries again
        cache.building = None
        logger.warning("ratelimits: could not start rebuilding the policy table (%s).", e)


def _check_in_background(build: int, known: bytes | None, checked_at: float) -> None:
    """The keeper thread's periodic check: read the stamp, and build when it moved
    or the table is too old. Otherwise the table is kept, and the thread goes on only to
    a rebuild asked for meanwhile (:func:`rebuild_in_background`)."""
    after: tuple[int, bytes | None, float] | None = None
    try:
        version, due = read_stamp(known, checked_at)
        if due:
            after = (build, version, checked_at)
        else:
            with cache.lock:
                after = _next_build(build)
    finally:
        if after is None:
            with cache.lock:
                if cache.building == build:
                    cache.building = None
    if after is not None:
        _build_in_background(*after)


def _build_in_background(build: int, version: bytes | None, checked_at: float) -> None:
    """The keeper thread's build: build the table, paced (:mod:`ratelimits.engine.table.pacing`),
    and swap it in; then the rebuild asked for meanwhile, if any. A failure keeps the
    table in use; the next check tries again (the stamp still differs from the one held,
    or the table is still too old)."""
    try:
        while True:
            with paced_by(Pacer()) as pacer:
                pacer.rest()  # the request that handed the build over goes on first
                table = _load_or_warn(pacer)
            with cache.lock:
                swapped = table is not None and cache.swap_in(build, table, version, checked_at)
                after = _next_build(build)
            if swapped:
                clear_denials()  # a limit may have changed, or counters were reset
            if after is None:
                return
            build, version, checked_at = after
    finally:
        with cache.lock:
            if cache.building == build:
                cache.building = None
        _release_thread()


def _next_build(done: int) -> tuple[int, bytes | None, float] | None:
    """The lock held, build ``done`` over: the rebuild asked for meanwhile, numbered and
    under way, or ``None`` (none was, or ``done`` was given up on or reset)."""
    if cache.building != done:
        return None
    if cache.rebuild is None:
        cache.building = None
        return None
    (version, checked_at), cache.rebuild = cache.rebuild, None
    build = cache.start_build()
    cache.building, cache.building_since = build, time.monotonic()
    return build, version, checked_at
