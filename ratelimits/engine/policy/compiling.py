"""Compiling a policy: :meth:`CompiledPolicy.compile <.compiled.CompiledPolicy.compile>`
from its :class:`~.spec.PolicySpec`, :meth:`~.compiled.CompiledPolicy.from_model` from a row.

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
from ratelimits.engine.keys.kinds import kind_of
from ratelimits.engine.policy.periods import NOMINAL_WINDOW, zone
from ratelimits.engine.policy.script_args import shard_args, window_slot
from ratelimits.engine.policy.spec import PolicySpec

if TYPE_CHECKING:
    from ratelimits.engine.policy.compiled import CompiledPolicy


def compile_spec(cls: type[CompiledPolicy], spec: PolicySpec) -> CompiledPolicy:
    """The compiled policy of ``spec`` (refused with ``ValueError`` as
    :meth:`PolicySpec.refuse` says). A concurrency policy counts all (it gives every slot
    back); a calendar policy's ``window`` becomes its period's nominal length. While
    ``RATELIMITS["MODE"]`` is ``"shadow"`` every policy is compiled as a shadow one
    (:mod:`ratelimits.engine.global_mode`)."""
    spec.refuse()
    calendar, time_zone, window = spec.calendar, spec.time_zone, int(spec.window)
    key, burst, limit, cost = spec.key, spec.burst, int(spec.limit), int(spec.cost)
    if calendar:
        time_zone = rules.calendar_zone(time_zone)
        zone(time_zone)  # an unknown name is refused here, not per request
        window = NOMINAL_WINDOW[calendar]
    else:
        time_zone = ""
    lockout = int(spec.lockout)
    until_lifted, extend = bool(spec.lockout_until_lifted), bool(spec.extend_lockout)
    locks = rules.lock_seconds(lockout, until_lifted)
    header = validators.header_name(key)
    enforce = spec.mode == modes.ENFORCE and not modes.shadows_all()
    burst = None if burst is None else int(burst)
    return cls(
        name=spec.name,
        endpoint=spec.endpoint,
        methods=frozenset(m for m in spec.methods.split(",") if m),
        algorithm=spec.algorithm,
        limit=limit,
        window=window,
        key=key,
        kind=kind_of(key),
        header_meta_key=meta_key(header) if header else None,
        enforce=enforce,
        fail_open=bool(spec.fail_open),
        script_args=shard_args(
            spec.algorithm,
            limit,
            window_slot(calendar, time_zone, window, locks, time.time(), extend)[0],
            "1" if enforce else "0",
            burst,
            cost,
            int(spec.shards),
        ),
        burst=burst,
        cost=cost,
        counts=spec.counts,
        calendar=calendar,
        time_zone=time_zone,
        lockout=lockout,
        ipv6_prefix=None if spec.ipv6_prefix is None else int(spec.ipv6_prefix),
        lockout_until_lifted=until_lifted,
        extend_lockout=extend,
        reset_on_success=bool(spec.reset_on_success),
    )


def from_model(cls: type[CompiledPolicy], row: object) -> CompiledPolicy:
    """The compiled policy of a ``Policy`` row (see :meth:`PolicySpec.of`), with its
    ``traffic`` switch."""
    policy = compile_spec(cls, PolicySpec.of(row))
    return policy if getattr(row, "traffic", True) else replace(policy, traffic=False)
