"""A policy's fields as one frozen value, :class:`PolicySpec`: what a ``Policy`` row, a
policy file or a decorator says, before the engine compiles it
(:meth:`~ratelimits.engine.policy.compiled.CompiledPolicy.compile`), and what the engine
refuses to compile (:meth:`PolicySpec.refuse`)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import ratelimits.engine.policy.rules as rules
from ratelimits.engine.policy.periods import CALENDARS

#: The fields a ``Policy`` row may leave out, and what they are then.
_OPTIONAL = {
    "burst": None,
    "cost": 1,
    "counts": "all",
    "calendar": "",
    "time_zone": "",
    "lockout": 0,
    "ipv6_prefix": None,
    "lockout_until_lifted": False,
    "extend_lockout": False,
    "reset_on_success": False,
}


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A policy's fields, passed whole. ``burst`` (token_bucket; ``None``: the limit) and
    ``cost`` (units one request spends) are at least 1; ``counts`` says which responses
    spend (:data:`~ratelimits.engine.policy.rules.COUNTS`); ``calendar`` (one of
    :data:`~ratelimits.engine.policy.periods.CALENDARS`) counts in the periods of
    ``time_zone`` (blank: ``settings.TIME_ZONE``) instead of ``window``; ``lockout``
    (seconds, 0: none) denies every request for that long after a denial, or until lifted
    (``lockout_until_lifted``), started again by every attempt during it with
    ``extend_lockout``; ``reset_on_success`` clears a sign-in's account on a success;
    ``ipv6_prefix`` (0 to 128 bits; ``None``: the ``IPV6_PREFIX`` setting) groups IPv6
    clients."""

    name: str
    endpoint: str
    algorithm: str
    limit: int
    window: int
    key: str = "user_or_ip"
    methods: str = ""
    mode: str = "enforce"
    fail_open: bool = True
    shards: int = 1
    burst: int | None = None
    cost: int = 1
    counts: str = "all"
    calendar: str = ""
    time_zone: str = ""
    lockout: int = 0
    ipv6_prefix: int | None = None
    lockout_until_lifted: bool = False
    extend_lockout: bool = False
    reset_on_success: bool = False

    @classmethod
    def of(cls, row: object) -> PolicySpec:
        """The spec of a ``Policy`` row, or of anything with its attributes (the optional
        ones may be missing or blank)."""
        values = {}
        for spec_field in fields(cls):
            name = spec_field.name
            if name in _OPTIONAL:
                value = getattr(row, name, None)
                values[name] = _OPTIONAL[name] if value in (None, "") else value
            else:
                values[name] = getattr(row, name)
        if not values["cost"]:
            values["cost"] = 1
        return cls(**values)

    def refuse(self) -> None:
        """Raise ``ValueError``, naming the field, for the first value the engine cannot
        compile: out of range, or breaking a rule of :mod:`~.rules`."""
        if self.ipv6_prefix is not None and not 0 <= int(self.ipv6_prefix) <= 128:
            raise ValueError(f"ipv6_prefix must be from 0 to 128 bits, not {self.ipv6_prefix}")
        if self.burst is not None and int(self.burst) < 1:
            raise ValueError(f"burst must be at least 1, not {self.burst}")
        if int(self.cost) < 1:
            raise ValueError(f"cost must be at least 1, not {self.cost}")
        if self.counts not in rules.COUNTS:
            raise ValueError(
                f"counts must be one of {', '.join(rules.COUNTS)}, not {self.counts!r}"
            )
        if self.calendar and self.calendar not in CALENDARS:
            raise ValueError(
                f"calendar must be one of {', '.join(CALENDARS)}, not {self.calendar!r}"
            )
        if int(self.lockout) < 0:
            raise ValueError(f"lockout must be 0 (none) or more seconds, not {self.lockout}")
        locks = rules.lock_seconds(int(self.lockout), bool(self.lockout_until_lifted))
        for problem in (
            rules.counts_problem(self.algorithm, self.counts),
            rules.calendar_problem(self.algorithm, self.calendar),
            rules.until_lifted_problem(bool(self.lockout_until_lifted), int(self.lockout)),
            rules.lockout_problem(locks, self.algorithm, int(self.shards), self.key),
            rules.extend_problem(
                bool(self.extend_lockout), int(self.lockout), bool(self.lockout_until_lifted)
            ),
            rules.reset_on_success_problem(bool(self.reset_on_success), self.counts, self.key),
        ):
            if problem is not None:
                raise ValueError(str(problem))
