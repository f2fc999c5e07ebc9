"""What the engine refuses to compile: a policy's fields out of range, or breaking a rule
of :mod:`ratelimits.engine.policy.rules`, as a ``ValueError`` naming the field."""

from __future__ import annotations

import ratelimits.engine.policy.rules as rules
from ratelimits.engine.policy.periods import CALENDARS


def refuse_arguments(
    *,
    algorithm: str,
    burst: int | None,
    cost: int,
    counts: str,
    calendar: str,
    lockout: int,
    shards: int,
    key: str,
    ipv6_prefix: int | None,
) -> None:
    """Raise ``ValueError`` for the first field ``CompiledPolicy.build`` cannot take."""
    if ipv6_prefix is not None and not 0 <= int(ipv6_prefix) <= 128:
        raise ValueError(f"ipv6_prefix must be from 0 to 128 bits, not {ipv6_prefix}")
    if burst is not None and int(burst) < 1:
        raise ValueError(f"burst must be at least 1, not {burst}")
    if int(cost) < 1:
        raise ValueError(f"cost must be at least 1, not {cost}")
    if counts not in rules.COUNTS:
        raise ValueError(f"counts must be one of {', '.join(rules.COUNTS)}, not {counts!r}")
    if calendar and calendar not in CALENDARS:
        raise ValueError(f"calendar must be one of {', '.join(CALENDARS)}, not {calendar!r}")
    if lockout < 0:
        raise ValueError(f"lockout must be 0 (none) or more seconds, not {lockout}")
    for problem in (
        rules.counts_problem(algorithm, counts),
        rules.calendar_problem(algorithm, calendar),
        rules.lockout_problem(lockout, algorithm, shards, key),
    ):
        if problem is not None:
            raise ValueError(str(problem))
