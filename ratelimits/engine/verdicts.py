"""Verdicts: from the decide code's reply (:mod:`ratelimits.engine.reply`), or from each
policy's fail mode when Redis could not answer."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import ratelimits.engine.reply as replies
from ratelimits.conf import app_settings
from ratelimits.engine.decision import Decision, Verdict
from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.reminders import Reminder

logger = logging.getLogger("ratelimits")


def verdict_from(checks: Sequence[Check], reply: replies.Reply) -> tuple[int, Verdict]:
    """``(now_us, verdict)`` from the decide code's reply for ``checks``."""
    decisions = tuple([_decision(check, reply, i) for i, check in enumerate(checks)])
    return replies.now_us(reply), Verdict(decisions)


def _decision(check: Check, reply: replies.Reply, index: int) -> Decision:
    allowed, count_milli, remaining, retry_ms, reset_ms, _ = replies.fields(reply, index)
    policy = check.policy
    denied = allowed != replies.ADMITTED
    if denied and check.units > 1 and check.units > policy.capacities[check.shard]:
        _warn_oversized(check)
    return Decision(
        policy=policy.name,
        identity=check.identity,
        allowed=allowed == replies.ADMITTED,
        enforce=policy.enforce,
        limit=policy.limit,
        window=policy.window,
        count=count_milli / 1000,
        remaining=int(remaining),
        retry_after=retry_ms / 1000,
        reset=reset_ms / 1000,
        lockout_started=allowed == replies.LOCKOUT_STARTED,
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
