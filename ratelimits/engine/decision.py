"""What the limiter decided: one :class:`Decision` per policy, one :class:`Verdict` per
request, read from the decide call's reply (:func:`verdict_from`) or made from each
policy's fail mode when Redis could not answer (:func:`fail_verdict`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import ratelimits.engine.decide_protocol as protocol
from ratelimits.conf import app_settings
from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.reminders import Reminder

if TYPE_CHECKING:
    from ratelimits.engine.receipt import Receipt

#: What a decision counts as in a request (the dashboard and Prometheus count these; see
#: :func:`outcome`).
ALL_OUTCOMES = ("allowed", "denied", "shadow_denied", "not_counted", "failed_open", "failed_closed")

#: Counted besides a decision's outcome, for an admitted request that took its policy's
#: count to ``RATELIMITS["NEAR_LIMIT"]`` of the limit (see
#: :mod:`ratelimits.engine.reporting.near_limit`).
NEAR_LIMIT = "near_limit"


# Decision and Verdict are read-only by contract, not frozen: a frozen dataclass pays a
# call per field to be built (about 4 µs a decision on the benchmark machine, on every
# request), a plain one assigns. Nothing in the engine changes one after it is made;
# remembered denials hand out copies (dataclasses.replace).


@dataclass(slots=True)
class Decision:
    """One policy's answer for one request (read-only: build another with
    ``dataclasses.replace``).

    ``count`` is the number of requests counted before this one (for
    ``sliding_counter``, the weighted estimate). ``remaining`` is how many more requests
    would be allowed right after this one. ``retry_after`` is the seconds until a denied
    request would be allowed (0 when allowed) and ``reset`` the seconds until one more
    unit of quota frees up. ``failed`` is true when Redis could not answer and
    ``allowed`` comes from the policy's ``fail_open``. ``cached`` is true for a denial the
    worker answered itself, from an earlier answer of Redis (see :mod:`ratelimits.engine.denials`).
    ``lockout_started`` is true for the denial that started the policy's lockout (once per
    lock; ``retry_after`` is then the lock's length, or the window's wait when longer).
    """

    policy: str
    identity: str
    allowed: bool
    enforce: bool
    limit: int
    window: int
    count: float
    remaining: int
    retry_after: float
    reset: float
    failed: bool = False
    cached: bool = False
    lockout_started: bool = False

    @property
    def available(self) -> int:
        """Requests this policy would still allow now, counting this one: ``remaining + 1``
        when allowed, else 0. For a read-only peek, what the client has left."""
        return self.remaining + 1 if self.allowed else 0

    @property
    def blocks(self) -> bool:
        """True when this decision denies the request (an enforcing policy said no)."""
        return self.enforce and not self.allowed

    @property
    def shadow_denied(self) -> bool:
        """True when a shadow policy would have denied the request."""
        return not self.enforce and not self.allowed


@dataclass(slots=True)
class Verdict:
    """All the decisions for one request (read-only)."""

    decisions: tuple[Decision, ...] = ()
    #: True unless an enforcing policy denied the request.
    allowed: bool = field(init=False, compare=False)
    #: What the admitted request may get back after its response (concurrency slots,
    #: units a response does not count): give it to ``limiter.give_back``. ``None``
    #: when there is nothing.
    receipt: Receipt | None = field(default=None, compare=False)
    #: The decisions of an admitted, recorded request whose policy's count this request
    #: took to ``RATELIMITS["NEAR_LIMIT"]`` of its limit (see
    #: :mod:`ratelimits.engine.reporting.near_limit`); usually none.
    near_limit: tuple[Decision, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        allowed = True
        for decision in self.decisions:
            if decision.enforce and not decision.allowed:
                allowed = False
        self.allowed = allowed

    @property
    def retry_after(self) -> float | None:
        """Seconds until every denying policy would allow the request; ``None`` if allowed."""
        waits = [decision.retry_after for decision in self.decisions if decision.blocks]
        return max(waits) if waits else None


#: ``(policy, outcome)`` for each decision of a request, then ``(policy, NEAR_LIMIT)`` for
#: each policy the request took near its limit: what the counts count.
Outcomes = tuple[tuple[str, str], ...]


def outcomes(verdict: Verdict) -> Outcomes:
    """What each decision of ``verdict`` counts as (see :func:`outcome`), then
    :data:`NEAR_LIMIT` for each of ``verdict.near_limit``."""
    admitted = verdict.allowed
    found = tuple((decision.policy, outcome(decision, admitted)) for decision in verdict.decisions)
    if verdict.near_limit:
        found += tuple((decision.policy, NEAR_LIMIT) for decision in verdict.near_limit)
    return found


def outcome(decision: Decision, admitted: bool) -> str:
    """What ``decision`` counts as, for a request the verdict ``admitted`` or not."""
    if decision.failed:
        return "failed_open" if decision.allowed else "failed_closed"
    if decision.shadow_denied:
        return "shadow_denied"
    if decision.blocks:
        return "denied"
    return "allowed" if admitted else "not_counted"


# Verdicts, from the decide call's reply or from each policy's fail mode.

logger = logging.getLogger("ratelimits")


def verdict_from(checks: Sequence[Check], reply: protocol.Reply) -> tuple[int, Verdict]:
    """``(now_us, verdict)`` from the decide code's reply for ``checks``."""
    decisions = tuple([_decision(check, reply, i) for i, check in enumerate(checks)])
    return protocol.now_us(reply), Verdict(decisions)


def _decision(check: Check, reply: protocol.Reply, index: int) -> Decision:
    allowed, count_milli, remaining, retry_ms, reset_ms, _ = protocol.fields(reply, index)
    policy = check.policy
    denied = allowed != protocol.ADMITTED
    if denied and check.units > 1 and check.units > policy.capacities[check.shard]:
        _warn_oversized(check)
    return Decision(
        policy=policy.name,
        identity=check.identity,
        allowed=allowed == protocol.ADMITTED,
        enforce=policy.enforce,
        limit=policy.limit,
        window=policy.window,
        count=count_milli / 1000,
        remaining=int(remaining),
        retry_after=retry_ms / 1000,
        reset=reset_ms / 1000,
        lockout_started=allowed == protocol.LOCKOUT_STARTED,
    )


#: Policies warned about a cost they can never grant (again each minute, per name).
_oversized = Reminder()


def _warn_oversized(check: Check) -> None:
    name = check.policy.name
    if not _oversized.due(name):
        return
    logger.warning(
        "ratelimits: policy %s can never grant a cost of %d (at most %d per shard): such "
        "requests are denied for a window. Repeated every minute while they come.",
        name,
        check.units,
        check.policy.capacities[check.shard],
    )


def fail_verdict(checks: Sequence[Check]) -> Verdict:
    """Each policy's fail mode: Redis could not answer, or its breaker is open."""
    retry_after = float(app_settings.FAIL_CLOSED_RETRY_AFTER)
    return Verdict(
        tuple(
            Decision(
                policy=c.policy.name,
                identity=c.identity,
                allowed=c.policy.fail_open,
                enforce=c.policy.enforce,
                limit=c.policy.limit,
                window=c.policy.window,
                count=0.0,
                remaining=0,
                retry_after=0.0 if c.policy.fail_open else retry_after,
                reset=0.0,
                failed=True,
            )
            for c in checks
        )
    )
