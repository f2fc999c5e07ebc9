"""The in-process policy table: which policies match a request, with no database query.

Each worker keeps the enabled policies compiled in memory. At most every
``POLICY_REFRESH_INTERVAL`` seconds a request checks a version stamp in Redis (one
``GET``, amortised over every request in that interval); when the stamp moved, or the
table is older than ``POLICY_MAX_AGE``, the table is reloaded from its source (the
database: :mod:`ratelimits.policy_source`, which ``AppConfig.ready()`` plugs in with
:func:`set_source`). A committed change, and a reset of counters, writes a new random
stamp (:func:`mark_changed`, called by :mod:`ratelimits.signals`), so every worker
enforces it within ``POLICY_REFRESH_INTERVAL`` seconds, even after Redis lost its data.
A reload also forgets the over-limit keys the worker remembers
(:mod:`ratelimits.engine.denials`).
"""

from __future__ import annotations

import fnmatch
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from django.core.signals import setting_changed

from ratelimits.conf import app_settings
from ratelimits.engine.denials import clear as clear_denials
from ratelimits.engine.keys import version_key
from ratelimits.engine.policy import CompiledPolicy
from ratelimits.engine.store import breaker as breakers
from ratelimits.engine.store import connection
from ratelimits.exceptions import ConfigurationError

logger = logging.getLogger("ratelimits")

#: What the table is loaded from: a callable returning the enabled policies, compiled.
PolicySource = Callable[[], Iterable[CompiledPolicy]]


def _no_source() -> Iterable[CompiledPolicy]:
    raise ConfigurationError(
        "ratelimits has no policy source: add 'ratelimits' to INSTALLED_APPS "
        "(its AppConfig.ready() connects the database)."
    )


_source: PolicySource = _no_source


def set_source(source: PolicySource) -> None:
    """Load the table from ``source`` from now on (and drop the one held)."""
    global _source
    _source = source
    reset()


#: Up to this many globs, a request tries each in turn: cheaper than the index's lookups.
FEW_GLOBS = 16
#: What makes an endpoint a glob (fnmatch's wildcards).
_WILDCARDS = re.compile(r"[*?[]")


def glob_prefix(pattern: str) -> str:
    """The literal part of a path glob up to its last ``/`` before the first wildcard:
    every path the glob matches starts with it (``/api/*/items`` -> ``/api/``; ``*.json``
    -> ``""``)."""
    wildcard = _WILDCARDS.search(pattern)
    literal = pattern if wildcard is None else pattern[: wildcard.start()]
    return literal[: literal.rfind("/") + 1]


def path_prefixes(path: str, depth: int = -1) -> list[str]:
    """``""`` and the prefixes of ``path`` that end in ``/``, the first ``depth`` of them
    (all with ``-1``): ``/a/b`` -> ``["", "/", "/a/"]``."""
    found = [""]
    slash = path.find("/")
    while slash != -1 and depth != 0:
        found.append(path[: slash + 1])
        slash = path.find("/", slash + 1)
        depth -= 1
    return found


class PolicyTable:
    """Enabled policies, indexed for matching a request.

    Endpoints that are names (a ``throttle_scope``, a URL name) are a dict lookup. Path
    globs are grouped by their literal prefix up to a ``/`` (:func:`glob_prefix`), so a
    request tries only the globs filed under one of its own path's prefixes: matching
    costs the path's depth plus the globs that could match, whatever the table's size.
    A table of at most :data:`FEW_GLOBS` globs tries them all, which is cheaper.
    """

    def __init__(self, policies: Iterable[CompiledPolicy]) -> None:
        self.policies = tuple(sorted(policies, key=lambda p: p.name))
        self._by_policy_name = {policy.name: policy for policy in self.policies}
        by_name: dict[str, list[CompiledPolicy]] = {}
        by_prefix: dict[str, list[tuple[int, re.Pattern[str], CompiledPolicy]]] = {}
        for order, policy in enumerate(self.policies):
            if policy.is_path_pattern:
                pattern = re.compile(fnmatch.translate(policy.endpoint))
                by_prefix.setdefault(glob_prefix(policy.endpoint), []).append(
                    (order, pattern, policy)
                )
            else:
                by_name.setdefault(policy.endpoint, []).append(policy)
        self._by_name = {name: tuple(found) for name, found in by_name.items()}
        self._globs_by_prefix = {prefix: tuple(found) for prefix, found in by_prefix.items()}
        #: The most ``/`` in a glob's prefix: a path's deeper prefixes file no glob.
        self._glob_depth = max((prefix.count("/") for prefix in by_prefix), default=0)
        every_glob = sorted(
            (glob for found in by_prefix.values() for glob in found), key=lambda glob: glob[0]
        )
        #: Every glob in policy-name order, when there are few enough to try them all.
        self._few_globs = tuple(every_glob) if len(every_glob) <= FEW_GLOBS else None

    def match(
        self, *, method: str, path: str, scope: str | None = None, url_name: str | None = None
    ) -> list[CompiledPolicy]:
        """Policies whose endpoint is ``scope`` or ``url_name`` or matches ``path`` (names
        first, then globs in the order of their policies' names)."""
        found: list[CompiledPolicy] = []
        if scope:
            found.extend(self._by_name.get(scope, ()))
        if url_name and url_name != scope:
            found.extend(self._by_name.get(url_name, ()))
        by_prefix = self._globs_by_prefix
        if self._few_globs is not None:
            found.extend(policy for _, pattern, policy in self._few_globs if pattern.match(path))
        elif by_prefix:
            globs = [
                (order, policy)
                for prefix in path_prefixes(path, self._glob_depth)
                if prefix in by_prefix
                for order, pattern, policy in by_prefix[prefix]
                if pattern.match(path)
            ]
            if len(globs) > 1:
                globs.sort(key=lambda item: item[0])
            found.extend(policy for _, policy in globs)
        return [p for p in found if not p.methods or method in p.methods]

    def get(self, name: str) -> CompiledPolicy | None:
        return self._by_policy_name.get(name)


class _TableCache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.table: PolicyTable | None = None
        self.version: bytes | None = None
        self.checked_at = 0.0
        self.loaded_at = 0.0

    def fresh_table(self, now: float) -> PolicyTable | None:
        """The table when it needs no check now, else ``None``. The table is read once:
        another thread may drop it (``mark_changed``) at any moment."""
        table = self.table
        if (
            table is not None
            and now - self.checked_at < float(app_settings.POLICY_REFRESH_INTERVAL)
            and now - self.loaded_at < float(app_settings.POLICY_MAX_AGE)
        ):
            return table
        return None


_cache = _TableCache()


def get_table() -> PolicyTable:
    """The current table; reloads it when a change was announced or it is too old."""
    now = time.monotonic()
    table = _cache.fresh_table(now)
    if table is not None:
        return table
    with _cache.lock:
        table = _cache.fresh_table(now)
        if table is not None:
            return table
        version = _read_version(_cache.version)
        too_old = now - _cache.loaded_at >= float(app_settings.POLICY_MAX_AGE)
        table = _cache.table
        if table is None or version != _cache.version or too_old:
            table = _cache.table = load_table()
            _cache.loaded_at = now
            clear_denials()  # a limit may have changed, or counters were reset
        _cache.version = version
        _cache.checked_at = now
        return table


def load_table() -> PolicyTable:
    """A new table from the source (the enabled policies and their overrides)."""
    return PolicyTable(_source())


def mark_changed() -> None:
    """Drop this process's table and remembered denials, and bump the version other
    workers watch (a policy changed, or counters were reset)."""
    with _cache.lock:
        _cache.table = None
    clear_denials()
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


def reset() -> None:
    """Forget the table (tests, settings changes); the next request loads it again."""
    with _cache.lock:
        _cache.table = None
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
        client = connection.get_client()
    except ConfigurationError as e:
        breakers.breaker.failure(e)
        return known
    guard = connection.breaker_for(client, key)
    if not guard.allow():
        return known
    try:
        version = client.get(key)
        if version is None:
            client.set(key, uuid.uuid4().hex, nx=True)
            version = client.get(key)
    except connection.REDIS_ERRORS as e:
        guard.failure(e)
        return known
    guard.success()
    return version


def _reset_on_setting_change(*, setting: str, **kwargs: Any) -> None:
    if setting in ("RATELIMITS", "CACHES"):
        reset()


setting_changed.connect(_reset_on_setting_change, dispatch_uid="ratelimits.engine.table")
