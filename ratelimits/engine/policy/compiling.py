"""Compiling a policy: :meth:`CompiledPolicy.build <.compiled.CompiledPolicy.build>`
from its fields, :meth:`~.compiled.CompiledPolicy.from_model` from a row.

Both are the class's constructors; their code lives here so that the class keeps to what
a compiled policy is and does.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

import ratelimits.engine.global_mode as modes
import ratelimits.engine.policy.rules as rules
from ratelimits import validators
from ratelimits.engine.keys.identity import meta_key
from ratelimits.engine.policy.periods import NOMINAL_WINDOW, zone
from ratelimits.engine.policy.refusals import refuse_arguments
from ratelimits.engine.policy.script_args import shard_args, window_slot

if TYPE_CHECKING:
    from ratelimits.engine.policy.compiled import CompiledPolicy


def build(
    cls: type[CompiledPolicy],
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
    calendar: str = "",
    time_zone: str = "",
    lockout: int = 0,
    ipv6_prefix: int | None = None,
) -> CompiledPolicy:
    """The compiled policy. ``burst`` (token_bucket; ``None``: the limit) must be at
    least 1, and so must ``cost``, the units one request spends. ``counts`` is one of
    :data:`COUNTS`; a concurrency policy counts all (it gives every slot back).
    ``calendar`` (one of :data:`~ratelimits.engine.policy.periods.CALENDARS`, for an algorithm
    of :data:`~ratelimits.engine.algorithms.CALENDAR`) counts in the periods of
    ``time_zone`` (an IANA name; blank: ``settings.TIME_ZONE``) instead of ``window``,
    which becomes the period's nominal length. ``lockout`` (seconds, 0: none) denies
    every request for that long after a denial; it needs one shard, an algorithm other
    than concurrency and a key other than ``global``. ``ipv6_prefix`` (0 to 128 bits;
    ``None``: the ``IPV6_PREFIX`` setting) groups IPv6 clients. While ``RATELIMITS["MODE"]``
    is ``"shadow"`` every policy is compiled as a shadow one
    (:mod:`ratelimits.engine.global_mode`)."""
    refuse_arguments(
        algorithm=algorithm,
        burst=burst,
        cost=cost,
        counts=counts,
        calendar=calendar,
        lockout=int(lockout),
        shards=int(shards),
        key=key,
        ipv6_prefix=ipv6_prefix,
    )
    if calendar:
        time_zone = rules.calendar_zone(time_zone)
        zone(time_zone)  # an unknown name is refused here, not per request
        window = NOMINAL_WINDOW[calendar]
    else:
        time_zone = ""
    lockout = int(lockout)
    header = validators.header_name(key)
    enforce = mode == modes.ENFORCE and not modes.shadows_all()
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
        script_args=shard_args(
            algorithm,
            int(limit),
            window_slot(calendar, time_zone, int(window), lockout, time.time())[0],
            "1" if enforce else "0",
            burst,
            int(cost),
            int(shards),
        ),
        burst=burst,
        cost=int(cost),
        counts=counts,
        calendar=calendar,
        time_zone=time_zone,
        lockout=lockout,
        ipv6_prefix=None if ipv6_prefix is None else int(ipv6_prefix),
    )


def from_model(cls: type[CompiledPolicy], policy: object) -> CompiledPolicy:
    """The policy from a ``Policy`` row (``burst``, ``cost``, ``counts``, ``calendar``,
    ``time_zone``, ``lockout`` and ``ipv6_prefix`` when it has them), with its ``traffic``
    switch."""
    compiled = build(
        cls,
        burst=getattr(policy, "burst", None),
        cost=getattr(policy, "cost", 1) or 1,
        counts=getattr(policy, "counts", "all") or "all",
        calendar=getattr(policy, "calendar", "") or "",
        time_zone=getattr(policy, "time_zone", "") or "",
        lockout=getattr(policy, "lockout", 0) or 0,
        ipv6_prefix=getattr(policy, "ipv6_prefix", None),
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
    return compiled if getattr(policy, "traffic", True) else replace(compiled, traffic=False)
