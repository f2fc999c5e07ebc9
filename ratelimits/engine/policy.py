"""A policy as the hot path needs it, and a check: one policy applied to one identity.

:class:`CompiledPolicy` is what the engine knows of a ``Policy`` row: built from its fields
(:meth:`CompiledPolicy.build`, :meth:`CompiledPolicy.from_model`), with an override's limit
(:meth:`CompiledPolicy.with_limit`), and resolved for one client (:meth:`for_client`).
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field, replace

from ratelimits import validators
from ratelimits.conf import app_settings
from ratelimits.engine.identity import meta_key
from ratelimits.engine.keys import build_key
from ratelimits.engine.overrides import Exemption, Overrides
from ratelimits.engine.store.commands import bulk_strings

#: The algorithm whose units come back when responses end (``lua/concurrency.lua``).
CONCURRENCY = "concurrency"
#: What ``counts`` may be: which responses spend a unit.
COUNTS = ("all", "failures", "successes")


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
    #: For each shard, its six ARGV slots in ``lua/decide.lua``: algorithm, the shard's
    #: share of the limit, window_ms, enforce, the shard's share of the burst (the limit's
    #: share for algorithms without one), cost. One entry for an unsharded policy.
    script_args: tuple[tuple[str, str, str, str, str, str], ...]
    #: Who gets another limit or none (:mod:`ratelimits.engine.overrides`); ``None`` when nobody.
    overrides: Overrides | None = field(default=None, compare=False, repr=False)
    #: For a policy an override made, which one ("user alice", "10.0.0.0/8"); else "".
    override: str = ""
    #: token_bucket: units that may be spent at once, as configured; ``None`` is the
    #: default, the limit (and stays the limit when an override changes it).
    burst: int | None = None
    #: Units one request spends under this policy (a :class:`Check` may set its own).
    cost: int = 1
    #: Which responses spend (:data:`COUNTS`): ``"all"``, ``"failures"`` (status 400 or
    #: more) or ``"successes"``; the others get their units back after the response.
    counts: str = "all"
    #: ``script_args`` as the bytes a decide call carries, per shard (made once, here).
    wire_args: tuple[bytes, ...] = field(init=False, compare=False, repr=False)
    #: ``script_args`` without the last slot, cost, as bytes: a request that spends
    #: another cost appends its own (:func:`encoded_cost`).
    wire_head: tuple[bytes, ...] = field(init=False, compare=False, repr=False)
    #: Per shard, the largest cost it can ever grant: its burst for token_bucket, else its
    #: limit. A larger one is denied for a window (and logged).
    capacities: tuple[int, ...] = field(init=False, compare=False, repr=False)
    #: True when an admitted request may get units back after its response: a
    #: concurrency policy, or one that does not count every response.
    gives_back: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "wire_args", tuple(map(bulk_strings, self.script_args)))
        object.__setattr__(
            self, "wire_head", tuple(bulk_strings(args[:5]) for args in self.script_args)
        )
        slot = 4 if self.algorithm == "token_bucket" else 1
        object.__setattr__(self, "capacities", tuple(int(a[slot]) for a in self.script_args))
        gives_back = self.algorithm == CONCURRENCY or self.counts != "all"
        object.__setattr__(self, "gives_back", gives_back)

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
        burst: int | None = None,
        cost: int = 1,
        counts: str = "all",
    ) -> CompiledPolicy:
        """The compiled policy. ``burst`` (token_bucket; ``None``: the limit) must be at
        least 1, and so must ``cost``, the units one request spends. ``counts`` is one of
        :data:`COUNTS`; a concurrency policy counts all (it gives every slot back)."""
        if burst is not None and int(burst) < 1:
            raise ValueError(f"burst must be at least 1, not {burst}")
        if int(cost) < 1:
            raise ValueError(f"cost must be at least 1, not {cost}")
        if counts not in COUNTS:
            raise ValueError(f"counts must be one of {', '.join(COUNTS)}, not {counts!r}")
        if algorithm == CONCURRENCY and counts != "all":
            raise ValueError("a concurrency policy counts all: it gives every slot back")
        header = validators.header_name(key)
        enforce = mode == "enforce"
        burst = None if burst is None else int(burst)
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
            script_args=_script_args(
                algorithm,
                int(limit),
                str(int(window) * 1000),
                "1" if enforce else "0",
                burst,
                int(cost),
                int(shards),
            ),
            burst=burst,
            cost=int(cost),
            counts=counts,
        )

    @classmethod
    def from_model(cls, policy: object) -> CompiledPolicy:
        """The policy from a ``Policy`` row (``burst``, ``cost`` and ``counts`` when it has
        them)."""
        return cls.build(
            burst=getattr(policy, "burst", None),
            cost=getattr(policy, "cost", 1) or 1,
            counts=getattr(policy, "counts", "all") or "all",
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
            },
        )

    def with_limit(self, limit: int, *, override: str) -> CompiledPolicy:
        """This policy with another limit (same key, window, cost and shards as far as the
        limit allows), as an override applies it.

        The burst follows the limit: a default burst (``None``) stays the limit, the new
        one; a configured one keeps its ratio to the limit, rounded, at least 1 (a policy
        of 10 per minute with bursts of 20 becomes, overridden to 100, bursts of 200)."""
        burst = self.burst
        if burst is not None:
            burst = max(1, round(burst * limit / self.limit))
        algorithm, _, window_ms, enforce, _, cost = self.script_args[0]
        return replace(
            self,
            limit=limit,
            script_args=_script_args(
                algorithm, limit, window_ms, enforce, burst, int(cost), len(self.script_args)
            ),
            burst=burst,
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
    def rate(self) -> str:
        """The rate as the admin and the command show it (:func:`describe_rate`)."""
        return describe_rate(
            self.limit, self.window, self.algorithm, self.burst, self.cost, self.counts
        )

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


def _script_args(
    algorithm: str,
    limit: int,
    window_ms: str,
    enforce: str,
    burst: int | None,
    cost: int,
    shards: int,
) -> tuple[tuple[str, str, str, str, str, str], ...]:
    """Each shard's ARGV slots (see ``CompiledPolicy.script_args``).

    A policy has at most ``limit`` shards (each has a unit of quota), and a token bucket
    at most ``burst`` (each shard's bucket holds a unit). A bucket's shards split the rate
    and the burst as :func:`shard_limits` splits a limit: shard i admits at most
    ``burst_i + limit_i * t / window`` units in any time t, so the policy, summed over its
    shards, admits at most ``burst + limit * t / window`` (as an unsharded bucket does),
    and, as for every sharded policy, a client whose requests all land in one shard may
    be denied earlier."""
    bursts = limit if burst is None else burst
    count = max(1, min(shards, limit, bursts if algorithm == "token_bucket" else limit))
    cost_slot = str(cost)
    return tuple(
        (algorithm, str(share), window_ms, enforce, str(bucket), cost_slot)
        for share, bucket in zip(
            shard_limits(limit, count), shard_limits(bursts, count), strict=True
        )
    )


@functools.lru_cache(maxsize=256)
def encoded_cost(cost: int) -> bytes:
    """The cost slot of a request that spends ``cost`` units, as a decide call carries it."""
    return bulk_strings([str(cost)])


def describe_rate(
    limit: int,
    window: int,
    algorithm: str,
    burst: int | None = None,
    cost: int = 1,
    counts: str = "all",
) -> str:
    """``"5 per 60 s"``, or for concurrency ``"2 at once, lease 60 s"``; a token bucket's
    burst, a cost other than 1 and counts other than all are added
    (``"2 per 2 s, burst 4, cost 3"``, ``"5 per 60 s, failures only"``)."""
    if algorithm == CONCURRENCY:
        text = f"{limit} at once, lease {window} s"
    else:
        text = f"{limit} per {window} s"
    if algorithm == "token_bucket" and burst is not None:
        text += f", burst {burst}"
    if cost != 1:
        text += f", cost {cost}"
    if counts != "all":
        text += f", {counts} only"
    return text


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
    #: The units this request spends, when its view sets them (``ratelimit_cost``);
    #: ``None``: the policy's own cost.
    cost: int | None = None

    @property
    def units(self) -> int:
        """The units this request spends under its policy."""
        return self.policy.cost if self.cost is None else self.cost

    @property
    def wire_args(self) -> bytes:
        """This check's ARGV slots as bytes: the policy's, pre-encoded, for its own cost."""
        cost = self.cost
        if cost is None or cost == self.policy.cost:
            return self.policy.wire_args[self.shard]
        return self.policy.wire_head[self.shard] + encoded_cost(cost)

    @property
    def key(self) -> str:
        return self.policy.key_for(self.identity, self.shard)
