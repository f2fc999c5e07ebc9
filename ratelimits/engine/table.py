"""The in-process policy table: which policies match a request, with no database query.

Each worker keeps the enabled policies compiled in memory. At most every
``POLICY_REFRESH_INTERVAL`` seconds a request checks a version stamp in Redis (one
``GET``, amortised over every request in that interval); when the stamp moved, or the
table is older than ``POLICY_MAX_AGE``, the table is reloaded from the database. A
committed change, and a reset of counters, writes a new random stamp (see
:mod:`ratelimits.signals`), so every worker enforces it within
``POLICY_REFRESH_INTERVAL`` seconds, even after Redis lost its data. A reload also
forgets the over-limit keys the worker remembers (:mod:`ratelimits.denials`).
"""

from __future__ import annotations

import fnmatch
import logging
import random
import re
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ratelimits import breaker as breakers
from ratelimits import connection, denials, identity, keys, validators
from ratelimits.conf import app_settings
from ratelimits.exceptions import ConfigurationError

if TYPE_CHECKING:
    from ratelimits.overrides import Exemption, Overrides

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
    #: For each shard, its four ARGV slots in ``lua/decide.lua``: algorithm, the shard's
    #: share of the limit, window_ms, enforce. One entry for an unsharded policy.
    script_args: tuple[tuple[str, str, str, str], ...]
    #: Who gets another limit or none (:mod:`ratelimits.overrides`); ``None`` when nobody.
    overrides: Overrides | None = field(default=None, compare=False, repr=False)
    #: For a policy an override made, which one ("user alice", "10.0.0.0/8"); else "".
    override: str = ""

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
        shards: int = 1,
    ) -> CompiledPolicy:
        header = validators.header_name(key)
        enforce = mode == "enforce"
        shards = max(1, min(int(shards), int(limit)))
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
            script_args=tuple(
                (algorithm, str(share), str(int(window) * 1000), "1" if enforce else "0")
                for share in shard_limits(int(limit), shards)
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
                    "shards",
                )
            }
        )

    def with_limit(self, limit: int, *, override: str) -> CompiledPolicy:
        """This policy with another limit (same key, window and shards as far as the limit
        allows), as an override applies it."""
        shards = min(len(self.script_args), limit)
        algorithm, _, window_ms, enforce = self.script_args[0]
        return replace(
            self,
            limit=limit,
            script_args=tuple(
                (algorithm, str(share), window_ms, enforce) for share in shard_limits(limit, shards)
            ),
            overrides=None,
            override=override,
        )

    def for_client(self, user_key: str | None, identity: str) -> CompiledPolicy | None:
        """The policy as it applies to this client after overrides; ``None`` when exempt."""
        if self.overrides is None:
            return self
        return self.overrides.resolve(self, user_key, identity)

    def rule_for(self, user_key: str | None, identity: str) -> CompiledPolicy | Exemption:
        """Like :meth:`for_client`, but an exemption is an :class:`~ratelimits.overrides.
        Exemption` naming the override (for tools that show which rule applied)."""
        if self.overrides is None:
            return self
        return self.overrides.rule(self, user_key, identity)

    @property
    def is_path_pattern(self) -> bool:
        return self.endpoint.startswith(("/", "*"))

    @property
    def shards(self) -> int:
        return len(self.script_args)

    def key_for(self, identity: str, shard: int = 0) -> str:
        """The key counting ``identity`` (in ``shard``, for a sharded policy)."""
        return keys.build_key(
            app_settings.KEY_PREFIX,
            identity,
            self.name,
            self.algorithm,
            shard if len(self.script_args) > 1 else None,
        )

    def pick_shard(self) -> int:
        """The shard one request counts in: uniformly at random (0 when unsharded)."""
        count = len(self.script_args)
        return random.randrange(count) if count > 1 else 0


def shard_limits(limit: int, shards: int) -> list[int]:
    """``limit`` split over ``shards`` as evenly as whole numbers allow (they sum to it)."""
    share, extra = divmod(limit, shards)
    return [share + (1 if i < extra else 0) for i in range(shards)]


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
            denials.clear()  # a limit may have changed, or counters were reset
        _cache.version = version
        _cache.checked_at = now
        return table


def load_table() -> PolicyTable:
    """Compile the enabled policies and their overrides from the database (one query, or
    up to three with overrides)."""
    from ratelimits import overrides
    from ratelimits.models import Policy

    rows = list(Policy.objects.filter(enabled=True))
    compiled = [CompiledPolicy.from_model(p) for p in rows]
    return PolicyTable(overrides.load(compiled, {p.name: p.pk for p in rows}))


def mark_changed() -> None:
    """Drop this process's table and remembered denials, and bump the version other
    workers watch (a policy changed, or counters were reset)."""
    with _cache.lock:
        _cache.table = None
    denials.clear()
    try:
        # A fresh random stamp, not a counter: after Redis lost its data a counter would
        # start again at 1, a value a worker may already hold, and that worker would miss
        # the change until POLICY_MAX_AGE.
        stamp = uuid.uuid4().hex
        connection.get_client().set(keys.version_key(app_settings.KEY_PREFIX), stamp)
    except (*connection.REDIS_ERRORS, ConfigurationError) as e:
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
    denials.clear()


def _read_version(known: bytes | None) -> bytes | None:
    """The version stamp in Redis; ``known`` when Redis cannot answer.

    A missing stamp is written (a random one, unless another worker wrote one first): the
    stamp then disappears only when Redis loses its data, and every worker notices that
    as a change, reloads and forgets the denials it remembers for counts that are gone."""
    key = keys.version_key(app_settings.KEY_PREFIX)
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
