"""Which policies a replay decides: the saved ones, a file's, or one proposed on the command
line; swept over limits and algorithms.

A :class:`Variant` is one policy as replayed: compiled to enforce (a shadow policy is
replayed as it would deny), under a name of its own so that the variants of a sweep keep
separate counters. A :class:`Scenario` is the variants decided together, one call per
line, all or nothing as a live request's policies are: the saved policies are one
scenario; each variant of a sweep is a scenario of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ratelimits.engine.algorithms import NAMES as ALGORITHM_NAMES
from ratelimits.engine.algorithms import bursts, released
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.policy.script_args import shard_args
from ratelimits.engine.table.policy_table import PolicyTable

#: The algorithm every other one is compared with in ``--algorithms``: exact.
EXACT = "sliding_log"


@dataclass(frozen=True)
class Variant:
    """One policy as a replay decides it."""

    #: The policy as it was given (its name, endpoint, limit... as the report shows them).
    shown: CompiledPolicy
    #: The policy the replay decides: enforcing, named apart from the other variants.
    policy: CompiledPolicy
    #: Which sweep this variant belongs to: variants of one policy at one limit share it,
    #: whatever their algorithm (``--algorithms`` compares them with the exact one); -1
    #: outside a sweep.
    group: int = -1


@dataclass
class Scenario:
    """Variants decided together: one decide call per line that any of them matches."""

    variants: list[Variant]
    table: PolicyTable = field(init=False)

    def __post_init__(self) -> None:
        self.table = PolicyTable([variant.policy for variant in self.variants])
        self.by_name = {variant.policy.name: variant for variant in self.variants}


@dataclass
class Selection:
    """The scenarios to replay, and the policies left out with why."""

    scenarios: list[Scenario]
    #: ``(policy name, reason)`` of each policy no line can be decided for.
    left_out: list[tuple[str, str]]

    @property
    def variants(self) -> list[Variant]:
        return [variant for scenario in self.scenarios for variant in scenario.variants]


def enforcing(policy: CompiledPolicy, name: str) -> CompiledPolicy:
    """``policy`` named ``name``, deciding as an enforced policy (a shadow one's denials
    are what the replay counts)."""
    args = tuple((a[0], a[1], a[2], "1", a[4], a[5]) for a in policy.script_args)
    return dataclasses.replace(policy, name=name, enforce=True, script_args=args)


def why_not_replayed(policy: CompiledPolicy) -> str | None:
    """Why no access log line can decide ``policy``; ``None`` when lines can."""
    if released(policy.algorithm):
        return (
            f"{policy.algorithm} counts requests in progress; an access log does not show "
            "how long each lasted"
        )
    if policy.signs_in:
        return "counts failed sign-ins by the attempted username, which a log does not show"
    if policy.kind.sign_in_only:
        return "key username: the attempted username of a sign-in is not in a log"
    return None


def select(
    policies: Sequence[CompiledPolicy],
    *,
    limits: Sequence[int] = (),
    algorithms: Sequence[str] = (),
) -> Selection:
    """The scenarios for ``policies``: all of them together, or, sweeping ``limits`` or
    ``algorithms`` (each policy's own when empty), one scenario per policy, limit and
    algorithm."""
    left_out: list[tuple[str, str]] = []
    replayed = []
    for policy in policies:
        why = why_not_replayed(policy)
        if why is None:
            replayed.append(policy)
        else:
            left_out.append((policy.name, why))
    if not limits and not algorithms:
        variants = [Variant(p, enforcing(p, p.name)) for p in replayed]
        return Selection([Scenario(variants)] if variants else [], left_out)
    scenarios = []
    group = 0
    for policy in replayed:
        for limit in limits or (policy.limit,):
            sized = policy if limit == policy.limit else policy.with_limit(limit, override="")
            for algorithm in algorithms or (policy.algorithm,):
                shown = _with_algorithm(sized, algorithm)
                name = f"{policy.name}~{limit}~{algorithm}"
                scenarios.append(Scenario([Variant(shown, enforcing(shown, name), group)]))
            group += 1
    return Selection(scenarios, left_out)


def _with_algorithm(policy: CompiledPolicy, algorithm: str) -> CompiledPolicy:
    if algorithm == policy.algorithm:
        return policy
    if policy.calendar:
        raise ValueError(
            f"policy {policy.name} counts in calendar periods, which only "
            f"{policy.algorithm} has: it cannot be replayed under other algorithms"
        )
    burst = policy.burst if bursts(algorithm) else None
    _, _, window_ms, enforce, _, _ = policy.script_args[0]
    args = shard_args(
        algorithm, policy.limit, window_ms, enforce, burst, policy.cost, len(policy.script_args)
    )
    return dataclasses.replace(policy, algorithm=algorithm, burst=burst, script_args=args)


def sweep_algorithms(names: Iterable[str]) -> list[str]:
    """``--algorithms``: the names given, ``all`` for every algorithm a log can replay
    (the exact one first); ``ValueError`` naming an unknown one."""
    found: list[str] = []
    for name in names:
        if name == "all":
            found.extend(n for n in ALGORITHM_NAMES if not released(n))
        elif name not in ALGORITHM_NAMES:
            raise ValueError(f"unknown algorithm {name!r} (one of {', '.join(ALGORITHM_NAMES)})")
        else:
            found.append(name)
    unique = list(dict.fromkeys(found))
    if EXACT in unique:
        unique.remove(EXACT)
        unique.insert(0, EXACT)
    return unique
