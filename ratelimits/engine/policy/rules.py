"""The rules a policy's fields keep together, in one place.

The model's validation (``Policy.clean``), its database constraints
(:mod:`ratelimits.constraints`) and the compiled policy (``CompiledPolicy.build``) all
read them here: a :class:`Problem` names the field and the reason, in the words the
admin, an import and the engine's ``ValueError`` all show.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

import ratelimits.engine.algorithms as algorithms
from ratelimits.engine.keys.kinds import USERS, KeyKind, is_key, kind_of

#: The ``counts`` that spends every admitted request.
ALL = "all"
#: The ``counts`` of a sign-in policy: decided by ``RateLimitBackend`` in ``authenticate()``,
#: never by the faces that decide a request.
SIGN_IN_FAILURES = "sign_in_failures"
#: What ``counts`` may be: which responses spend a unit (the model's ``Counts``).
COUNTS = (ALL, "failures", "successes", SIGN_IN_FAILURES)
#: A lockout locks one counter: its policy has this many shards.
LOCKOUT_SHARDS = 1
#: How long a lock "until lifted" lasts, in seconds: ten years. Every key keeps a TTL
#: (idle clients cost nothing, and a forgotten lock ends), so the lock is only very long;
#: an operator's reset, ``ratelimits reset`` or a new password lifts it.
UNTIL_LIFTED = 10 * 365 * 86400


@dataclass(frozen=True, slots=True)
class Problem:
    """A rule a policy breaks: the field to fix, and why."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def calendar_zone(time_zone: str) -> str:
    """The IANA zone of a calendar policy's periods: its own, else the site's
    ``TIME_ZONE``, else UTC."""
    return time_zone or settings.TIME_ZONE or "UTC"


def shards_problem(shards: object, limit: object, burst: object) -> Problem | None:
    """Every shard admits at least one unit, and takes at least one at once."""
    if isinstance(shards, int) and isinstance(limit, int) and 1 <= limit < shards:
        return Problem("shards", f"At most the limit ({limit}): every shard admits at least 1.")
    if isinstance(shards, int) and isinstance(burst, int) and 1 <= burst < shards:
        return Problem(
            "shards", f"At most the burst ({burst}): every shard takes at least 1 at once."
        )
    return None


def burst_problem(algorithm: str, burst: object) -> Problem | None:
    """Only an algorithm with bursts has a burst."""
    if burst is not None and not algorithms.bursts(algorithm):
        names = " or ".join(algorithms.BURSTING)
        return Problem("burst", f"Only a {names} policy has a burst: leave it blank.")
    return None


def counts_problem(algorithm: str, counts: str) -> Problem | None:
    """An algorithm whose units come back after every response counts them all."""
    if algorithms.released(algorithm) and counts not in ("", ALL):
        return Problem(
            "counts",
            f"A {algorithm} policy gives every slot back when the response is done: choose all.",
        )
    return None


def calendar_problem(algorithm: str, calendar: str) -> Problem | None:
    """Only an algorithm that takes calendar windows counts in calendar periods."""
    if calendar and algorithm not in algorithms.CALENDAR:
        names = " or ".join(algorithms.CALENDAR)
        labels = " or ".join(algorithms.get(name).label for name in algorithms.CALENDAR)
        return Problem(
            "calendar",
            f"Only a {names} policy counts in calendar periods: choose {labels}, or a "
            "rolling window.",
        )
    return None


def time_zone_problem(calendar: str, time_zone: str) -> Problem | None:
    """Only a calendar period has a time zone."""
    if time_zone and not calendar:
        return Problem(
            "time_zone",
            "Only a calendar period has a time zone: choose a calendar day, week or month, "
            "or leave it blank.",
        )
    return None


def lockout_problem(lockout: object, algorithm: str, shards: object, key: str) -> Problem | None:
    """A lockout needs counts that stay spent, one shard, and a counter per client."""
    if not isinstance(lockout, int) or lockout == 0:
        return None
    if algorithms.released(algorithm):
        return Problem("lockout", f"A {algorithm} policy has no lockout: its slots come back.")
    if isinstance(shards, int) and shards > LOCKOUT_SHARDS:
        return Problem(
            "lockout", "A lockout needs one shard: set shards to 1, or the lockout to 0."
        )
    if _kind(key) is not None and _kind(key).shared:
        return Problem(
            "lockout",
            "A global policy has one counter for everyone: one client's denial would lock "
            "every client out. Set the lockout to 0, or count per user or ip.",
        )
    return None


def lock_seconds(lockout: int, until_lifted: bool) -> int:
    """How long a policy's lock lasts: :data:`UNTIL_LIFTED` for one until lifted, else its
    ``lockout`` (0: none)."""
    return UNTIL_LIFTED if until_lifted else lockout


def until_lifted_problem(until_lifted: bool, lockout: object) -> Problem | None:
    """A lock until lifted has no length of its own."""
    if until_lifted and isinstance(lockout, int) and lockout:
        return Problem(
            "lockout", "Leave the lockout at 0: a lock until lifted lasts until it is lifted."
        )
    return None


def extend_problem(extend: bool, lockout: object, until_lifted: bool) -> Problem | None:
    """Only a lockout of some seconds can start again."""
    if not extend:
        return None
    if until_lifted:
        return Problem("extend_lockout", "A lock until lifted never ends: nothing to extend.")
    if not isinstance(lockout, int) or lockout == 0:
        return Problem("extend_lockout", "Only a lockout can be extended: give it seconds.")
    return None


def reset_on_success_problem(reset: bool, counts: str, key: str) -> Problem | None:
    """Only a sign-in policy that counts an account has failures a success clears."""
    if not reset:
        return None
    kind = _kind(key)
    if counts != SIGN_IN_FAILURES or (kind is not None and not kind.sign_in_only):
        return Problem(
            "reset_on_success",
            "Only a sign-in policy counting by username (username, username+ip) has an "
            "account whose failures a success clears.",
        )
    return None


def sign_in_problem(key: str, counts: str) -> Problem | None:
    """Only failed sign-ins have an attempted username, and some kinds never count one
    (:attr:`~ratelimits.engine.keys.kinds.KeyKind.not_for_sign_in`)."""
    kind = _kind(key)
    if kind is None:
        return None
    if kind.sign_in_only and counts != SIGN_IN_FAILURES:
        return Problem(
            "key",
            "Only failed sign-ins have an attempted username: choose counts = failed "
            "sign-ins, or another key.",
        )
    if counts == SIGN_IN_FAILURES and kind.not_for_sign_in:
        return Problem(
            "key",
            f"{kind.not_for_sign_in}: count failed sign-ins by username, ip, user_or_ip or "
            "username+ip.",
        )
    return None


def _kind(key: str) -> KeyKind | None:
    """The kind ``key`` names; ``None`` for a key the registry does not know (refused by
    its own validation)."""
    return kind_of(key) if is_key(key) else None


def target_problem(targets: int) -> Problem | None:
    """An override names exactly one of a user, a group or an identity."""
    if targets != 1:
        return Problem("__all__", "Name exactly one of a user, a group or an identity.")
    return None


def anon_target_problem(key: str, names_user: bool) -> Problem | None:
    """An anon policy never counts a signed-in user: an override names an address."""
    kind = _kind(key)
    if kind is not None and USERS not in kind.overrides and names_user:
        return Problem(
            "__all__",
            "A policy keyed by anon never counts signed-in users: name an IP address or "
            "network instead of a user or a group.",
        )
    return None


def exempt_problem(exempt: bool, limit: object) -> Problem | None:
    """An override is exempt, with no limit, or has a limit (0: blocked)."""
    if exempt and limit is not None:
        return Problem("limit", "Leave the limit blank for an exempt override.")
    if not exempt and limit is None:
        return Problem("limit", "Give a limit, or tick exempt.")
    return None


def first_problem(
    *,
    algorithm: str,
    limit: object,
    shards: object,
    burst: object,
    counts: str,
    calendar: str,
    time_zone: str,
    lockout: object,
    key: str,
    lockout_until_lifted: bool = False,
    extend_lockout: bool = False,
    reset_on_success: bool = False,
) -> Problem | None:
    """The first rule these fields break, in the order the admin reports them."""
    locks = lockout if not lockout_until_lifted else UNTIL_LIFTED
    for problem in (
        shards_problem(shards, limit, None),
        burst_problem(algorithm, burst),
        counts_problem(algorithm, counts),
        shards_problem(shards, None, burst),
        calendar_problem(algorithm, calendar),
        time_zone_problem(calendar, time_zone),
        until_lifted_problem(lockout_until_lifted, lockout),
        lockout_problem(locks, algorithm, shards, key),
        extend_problem(extend_lockout, lockout, lockout_until_lifted),
        sign_in_problem(key, counts),
        reset_on_success_problem(reset_on_success, counts, key),
    ):
        if problem is not None:
            return problem
    return None
