"""The in-process policy table: which policies match a request, with no database query.

Each worker keeps the enabled policies compiled in memory. At most every
``POLICY_REFRESH_INTERVAL`` seconds a request checks a version stamp in Redis (one
``GET``, amortised over every request in that interval); when the stamp moved, or the
table is older than ``POLICY_MAX_AGE``, the table is reloaded from the database. A
committed change bumps the stamp (see :mod:`ratelimits.signals`), so every worker
enforces it within ``POLICY_REFRESH_INTERVAL`` seconds.
"""

from __future__ import annotations

import fnmatch
import logging
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

import redis

from ratelimits import connection, identity, keys, validators
from ratelimits.breaker import breaker
from ratelimits.conf import app_settings
from ratelimits.exceptions import ConfigurationError

logger = logging.getLogger("ratelimits")


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    """A policy as the hot path needs it: immutable, with its script arguments ready."""

    name: str
    endpoint: str
    methods: frozenset[str]
    algorithm: str
    limit: int
    window: int
    key: str
    key_kind: str
    header_meta_key: str | None
    enforce: bool
    fail_open: bool
    #: This policy's four ARGV slots in ``lua/decide.lua``: algorithm, limit, window_ms, enforce.
    script_args: tuple[str, str, str, str]

    @classmethod
    def build(
        cls,
        *,
        name: str,
        endpoint: str,
        algorithm: str,
        limit: int,
        window: int,
        key: str = "user_or_ip",
        methods: str = "",
        mode: str = "enforce",
        fail_open: bool = True,
    ) -> CompiledPolicy:
        header = validators.header_name(key)
        enforce = mode == "enforce"
        return cls(
            name=name,
            endpoint=endpoint,
            methods=frozenset(m for m in methods.split(",") if m),
            algorithm=algorithm,
            limit=int(limit),
            window=int(window),
            key=key,
            key_kind="header" if header else key,
            header_meta_key=identity.meta_key(header) if header else None,
            enforce=enforce,
            fail_open=bool(fail_open),
            script_args=(
                algorithm,
                str(int(limit)),
                str(int(window) * 1000),
                "1" if enforce else "0",
            ),
        )

    @classmethod
    def from_model(cls, policy: object) -> CompiledPolicy:
        return cls.build(
            **{
                field: getattr(policy, field)
                for field in (
                    "name",
                    "endpoint",
                    "algorithm",
                    "limit",
                    "window",
                    "key",
                    "methods",
                    "mode",
                    "fail_open",
                )
            }
        )

    @property
    def is_path_pattern(self) -> bool:
        return self.endpoint.startswith(("/", "*"))

    def key_for(self, identity: str) -> str:
        return keys.build_key(app_settings.KEY_PREFIX, identity, self.name, self.algorithm)


class PolicyTable:
    """Enabled policies, indexed for matching a request."""

    def __init__(self, policies: Iterable[CompiledPolicy]) -> None:
        self.policies = tuple(sorted(policies, key=lambda p: p.name))
        by_name: dict[str, list[CompiledPolicy]] = {}
        globs: list[tuple[re.Pattern[str], CompiledPolicy]] = []
        for policy in self.policies:
            if policy.is_path_pattern:
                globs.append((re.compile(fnmatch.translate(policy.endpoint)), policy))
            else:
                by_name.setdefault(policy.endpoint, []).append(policy)
        self._by_name = {name: tuple(found) for name, found in by_name.items()}
        self._globs = tuple(globs)

    def match(
        self, *, method: str, path: str, scope: str | None = None, url_name: str | None = None
    ) -> list[CompiledPolicy]:
        """Policies whose endpoint is ``scope`` or ``url_name`` or matches ``path``."""
        found: list[CompiledPolicy] = []
        if scope:
            found.extend(self._by_name.get(scope, ()))
        if url_name and url_name != scope:
            found.extend(self._by_name.get(url_name, ()))
        for pattern, policy in self._globs:
            if pattern.match(path):
                found.append(policy)
        return [p for p in found if not p.methods or method in p.methods]

    def get(self, name: str) -> CompiledPolicy | None:
        return next((p for p in self.policies if p.name == name), None)


class _TableCache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.table: PolicyTable | None = None
        self.version: bytes | None = None
        self.checked_at = 0.0
        self.loaded_at = 0.0

    def fresh(self, now: float) -> bool:
        return (
            self.table is not None
            and now - self.checked_at < float(app_settings.POLICY_REFRESH_INTERVAL)
            and now - self.loaded_at < float(app_settings.POLICY_MAX_AGE)
        )


_cache = _TableCache()


def get_table() -> PolicyTable:
    """The current table; reloads it when a change was announced or it is too old."""
    now = time.monotonic()
    if _cache.fresh(now):
        return _cache.table  # type: ignore[return-value]
    with _cache.lock:
        if _cache.fresh(now):
            return _cache.table  # type: ignore[return-value]
        version = _read_version(_cache.version)
        too_old = now - _cache.loaded_at >= float(app_settings.POLICY_MAX_AGE)
        if _cache.table is None or version != _cache.version or too_old:
            _cache.table = load_table()
            _cache.loaded_at = now
        _cache.version = version
        _cache.checked_at = now
        return _cache.table


def load_table() -> PolicyTable:
    """Compile the enabled policies from the database (one query)."""
    from ratelimits.models import Policy

    return PolicyTable(CompiledPolicy.from_model(p) for p in Policy.objects.filter(enabled=True))


def mark_changed() -> None:
    """Drop this process's table and bump the version other workers watch."""
    with _cache.lock:
        _cache.table = None
    try:
        connection.get_client().incr(keys.version_key(app_settings.KEY_PREFIX))
    except (redis.RedisError, ConfigurationError) as e:
        logger.warning(
            "ratelimits: could not announce a policy change to other workers (%s); "
            "they pick it up within POLICY_MAX_AGE (%s s).",
            e,
            app_settings.POLICY_MAX_AGE,
        )


def reset() -> None:
    """Forget the table (tests, settings changes)."""
    with _cache.lock:
        _cache.table = None
        _cache.version = None
        _cache.checked_at = _cache.loaded_at = 0.0


def _read_version(known: bytes | None) -> bytes | None:
    """The version stamp in Redis; ``known`` when Redis cannot answer."""
    if not breaker.allow():
        return known
    try:
        version = connection.get_client().get(keys.version_key(app_settings.KEY_PREFIX))
    except (redis.RedisError, ConfigurationError) as e:
        breaker.failure(e)
        return known
    breaker.success()
    return version
