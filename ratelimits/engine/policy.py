"""A policy as the hot path needs it, and a check: one policy applied to one identity.

:class:`CompiledPolicy` is what the engine knows of a ``Policy`` row: built from its fields
(:meth:`CompiledPolicy.build`, :meth:`CompiledPolicy.from_model`), with an override's limit
(:meth:`CompiledPolicy.with_limit`), and resolved for one client (:meth:`for_client`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from ratelimits import validators
from ratelimits.conf import app_settings
from ratelimits.engine.identity import meta_key
from ratelimits.engine.keys import build_key
from ratelimits.engine.overrides import Exemption, Overrides
from ratelimits.engine.store.commands import bulk_strings


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
    #: Who gets another limit or none (:mod:`ratelimits.engine.overrides`); ``None`` when nobody.
    overrides: Overrides | None = field(default=None, compare=False, repr=False)
    #: For a policy an override made, which one ("user alice", "10.0.0.0/8"); else "".
    override: str = ""
    #: ``script_args`` as the bytes a decide call carries, per shard (made once, here).
    wire_args: tuple[bytes, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "wire_args", tuple(map(bulk_strings, self.script_args)))

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
            header_meta_key=meta_key(header) if header else None,
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
        """Like :meth:`for_client`, but an exemption is an :class:`~ratelimits.engine.overrides.
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
        return build_key(
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


@dataclass(slots=True)
class Check:
    """One policy to apply to one identity (in one shard of a sharded policy). Read-only
    by contract, not frozen: one is built per policy on every request, and a frozen
    dataclass pays a call per field to be built."""

    policy: CompiledPolicy
    identity: str
    shard: int = 0

    @property
    def key(self) -> str:
        return self.policy.key_for(self.identity, self.shard)
