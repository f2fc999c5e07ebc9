"""A policy as the hot path needs it, and a check: one policy applied to one identity,
in one shard, for one request.

:class:`CompiledPolicy` is what the engine knows of a ``Policy`` row: built from its fields
(:meth:`CompiledPolicy.build`, :meth:`CompiledPolicy.from_model`), with an override's limit
(:meth:`CompiledPolicy.with_limit`), and resolved for one client (:meth:`for_client`).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace
from typing import Any

import ratelimits.engine.algorithms as algorithms
import ratelimits.engine.policy.compiling as compiling
import ratelimits.engine.policy.rules as rules
from ratelimits.conf import app_settings
from ratelimits.engine.keys.kinds import KeyKind
from ratelimits.engine.keys.names import build_key
from ratelimits.engine.policy.describe import describe_rate
from ratelimits.engine.policy.overrides import Exemption, Overrides, Previous
from ratelimits.engine.policy.script_args import (
    ScriptArgs,
    WireArgs,
    encoded_cost,
    shard_args,
    window_slot,
    wire,
)
from ratelimits.engine.policy.spec import PolicySpec
from ratelimits.validators import GLOB_STARTS, endpoint_names

#: What ``counts`` may be: which responses spend a unit.
COUNTS = rules.COUNTS


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
    #: Who is counted: the key's kind in the registry (:mod:`ratelimits.engine.keys.kinds`).
    kind: KeyKind
    header_meta_key: str | None
    enforce: bool
    fail_open: bool
    #: For each shard, its six ARGV slots in ``lua/decide.lua``: algorithm, the shard's
    #: share of the limit, the window slot (``window_ms``, with a lockout ``+<ms>``; a
    #: calendar policy's are the period's at build time, see :meth:`args_at`), enforce,
    #: the shard's share of the burst (the limit's share for algorithms without one),
    #: cost. One entry for an unsharded policy.
    script_args: ScriptArgs
    #: Who gets another limit or none (:mod:`~.overrides`); ``None`` when nobody.
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
    #: ``"day"``, ``"week"`` or ``"month"``: counts reset at the local start of each such
    #: period of :attr:`time_zone` (:mod:`ratelimits.engine.policy.periods`); ``""``: the rolling
    #: ``window``.
    calendar: str = ""
    #: The IANA time zone of a calendar policy's periods (``""`` for a rolling window).
    time_zone: str = ""
    #: Seconds every request is denied after the first one this policy denies; 0: none
    #: (or until lifted, with :attr:`lockout_until_lifted`: see :attr:`lock_seconds`).
    lockout: int = 0
    #: IPv6 clients count per network of this many bits; ``None``: ``IPV6_PREFIX``.
    ipv6_prefix: int | None = None
    #: The lock lasts until an operator (or a new password) lifts it:
    #: :data:`~.rules.UNTIL_LIFTED` seconds.
    lockout_until_lifted: bool = False
    #: Every attempt during a lock starts it again.
    extend_lockout: bool = False
    #: A sign-in that succeeds clears its key in this policy (the account's failures).
    reset_on_success: bool = False
    #: Whether its decisions feed the traffic record (:mod:`ratelimits.engine.traffic`); the
    #: ``RATELIMITS["TRAFFIC"]`` setting turns it off for every policy.
    traffic: bool = True
    #: ``script_args`` as the bytes a decide call carries, per shard (made once, here).
    wire_args: WireArgs = field(init=False, compare=False, repr=False)
    #: ``script_args`` without the last slot, cost, as bytes: a request that spends
    #: another cost appends its own (:func:`encoded_cost`).
    wire_head: WireArgs = field(init=False, compare=False, repr=False)
    #: Per shard, the largest cost it can ever grant: its burst for token_bucket, else its
    #: limit. A larger one is denied for a window (and logged).
    capacities: tuple[int, ...] = field(init=False, compare=False, repr=False)
    #: True when an admitted request may get units back after its response: a
    #: concurrency policy, or one that does not count every response.
    gives_back: bool = field(init=False, compare=False, repr=False)
    #: True for a sign-in policy (``counts = "sign_in_failures"``): ``RateLimitBackend``
    #: decides it in ``authenticate()``, and the faces that decide requests never do.
    signs_in: bool = field(init=False, compare=False, repr=False)
    #: A calendar policy's arguments for the period the worker's clock is in:
    #: ``[(valid_until, script_args, wire_args, wire_head)]``, replaced whole when the
    #: period ends (one list item, so a reader on another thread sees one period's).
    _period: list[tuple[float, ScriptArgs, WireArgs, WireArgs]] = field(
        init=False, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        wire_args, wire_head = wire(self.script_args)
        object.__setattr__(self, "wire_args", wire_args)
        object.__setattr__(self, "wire_head", wire_head)
        slot = algorithms.capacity_slot(self.algorithm)
        object.__setattr__(self, "capacities", tuple(int(a[slot]) for a in self.script_args))
        gives_back = algorithms.released(self.algorithm) or self.counts != "all"
        object.__setattr__(self, "gives_back", gives_back)
        object.__setattr__(self, "signs_in", self.counts == rules.SIGN_IN_FAILURES)
        object.__setattr__(self, "_period", [(0.0, self.script_args, (), ())])

    #: The compiled policy of a :class:`PolicySpec` (:func:`.compiling.compile_spec`).
    compile = classmethod(compiling.compile_spec)
    #: The compiled policy of a ``Policy`` row (:func:`.compiling.from_model`).
    from_model = classmethod(compiling.from_model)

    @classmethod
    def build(cls, **fields: Any) -> CompiledPolicy:
        """The compiled policy of ``PolicySpec(**fields)``: a shorthand for tests, tools
        and benchmarks that spell a policy out."""
        return cls.compile(PolicySpec(**fields))

    @property
    def spec(self) -> PolicySpec:
        """The fields this policy was compiled from (the mode as compiled: a shadow one
        under ``RATELIMITS["MODE"] = "shadow"``)."""
        return PolicySpec(
            name=self.name,
            endpoint=self.endpoint,
            algorithm=self.algorithm,
            limit=self.limit,
            window=self.window,
            key=self.key,
            methods=",".join(sorted(self.methods)),
            mode="enforce" if self.enforce else "shadow",
            fail_open=self.fail_open,
            shards=self.shards,
            burst=self.burst,
            cost=self.cost,
            counts=self.counts,
            calendar=self.calendar,
            time_zone=self.time_zone,
            lockout=self.lockout,
            ipv6_prefix=self.ipv6_prefix,
            lockout_until_lifted=self.lockout_until_lifted,
            extend_lockout=self.extend_lockout,
            reset_on_success=self.reset_on_success,
        )

    @property
    def lock_seconds(self) -> int:
        """How long a lock of this policy lasts (0: it has no lockout)."""
        return rules.lock_seconds(self.lockout, self.lockout_until_lifted)

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
            script_args=shard_args(
                algorithm, limit, window_ms, enforce, burst, int(cost), len(self.script_args)
            ),
            burst=burst,
            overrides=None,
            override=override,
        )

    def without_lockout(self) -> CompiledPolicy:
        """This policy without its lockout: the same key, limit and window, read by its
        count alone (for a tool that tells a lockout's denial from the count's)."""
        if not self.lock_seconds:
            return self
        window = self.script_args[0][2].split("+")[0]  # the slot without "+<lockout_ms>"
        return replace(
            self,
            lockout=0,
            lockout_until_lifted=False,
            extend_lockout=False,
            script_args=self._with_window(window),
        )

    def args_at(self, now: float | None = None) -> ScriptArgs:
        """:attr:`script_args` for a request at ``now`` (seconds since the epoch; ``None``:
        the worker's clock): a calendar policy's window slot holds that period's
        boundaries."""
        if not self.calendar:
            return self.script_args
        if now is None:
            return self.current_period()[1]
        return self._with_window(self._window_at(now)[0])

    def current_period(
        self,
    ) -> tuple[float, ScriptArgs, WireArgs, WireArgs]:
        """A calendar policy's arguments for the period the worker's clock is in:
        ``(valid_until, script_args, wire_args, wire_head)``, made once per period."""
        held = self._period[0]
        now = time.time()
        if now < held[0]:
            return held
        window, valid_until = self._window_at(now)
        args = self._with_window(window)
        fresh = (valid_until, args, *wire(args))
        self._period[0] = fresh
        return fresh

    def _window_at(self, now: float) -> tuple[str, float]:
        return window_slot(
            self.calendar,
            self.time_zone,
            self.window,
            self.lock_seconds,
            now,
            self.extend_lockout,
        )

    def _with_window(self, window: str) -> ScriptArgs:
        return tuple((a[0], a[1], window, a[3], a[4], a[5]) for a in self.script_args)

    def for_client(
        self, user_key: str | None, identity: str, previous: Previous | None = None
    ) -> CompiledPolicy | None:
        """The policy as it applies to this client after overrides; ``None`` when exempt.
        ``previous``: the client's identity under each ``SECRET_KEY_FALLBACKS`` key, when
        asked (see :meth:`~ratelimits.engine.policy.overrides.Overrides.rule`)."""
        if self.overrides is None:
            return self
        return self.overrides.resolve(self, user_key, identity, previous)

    def rule_for(
        self, user_key: str | None, identity: str, previous: Previous | None = None
    ) -> CompiledPolicy | Exemption:
        """Like :meth:`for_client`, but an exemption is an :class:`~.overrides.Exemption`
        naming the override (for tools that show which rule applied)."""
        if self.overrides is None:
            return self
        return self.overrides.rule(self, user_key, identity, previous)

    @property
    def is_path_pattern(self) -> bool:
        return self.endpoint.startswith(GLOB_STARTS)

    @property
    def names(self) -> tuple[str, ...]:
        """The throttle scopes and URL names it matches (one, or those its endpoint lists);
        none for a path glob."""
        return endpoint_names(self.endpoint)

    @property
    def rate_display(self) -> str:
        """The rate as the admin and the command show it (:func:`describe_rate`)."""
        return describe_rate(self)

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
        cost, policy = self.cost, self.policy
        if policy.calendar:  # this period's boundaries
            _, _, wire_args, wire_head = policy.current_period()
        else:
            wire_args, wire_head = policy.wire_args, policy.wire_head
        if cost is None or cost == policy.cost:
            return wire_args[self.shard]
        return wire_head[self.shard] + encoded_cost(cost)

    @property
    def key(self) -> str:
        return self.policy.key_for(self.identity, self.shard)
