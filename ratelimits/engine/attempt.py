"""One request's decision around its Redis calls, the same for sync and async callers:
the remembered denial that answers it without a call, the verdict from the reply (and
the denials it teaches the worker), or each policy's fail mode after the error the
calls met. A recorded request is counted once (stats, the dashboard, Prometheus, the
traffic record), with the time it took here."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import ratelimits.engine.decide_protocol as protocol
from ratelimits.engine.decision import Decision, Verdict, fail_verdict, verdict_from
from ratelimits.engine.denials import generation as denials_generation
from ratelimits.engine.denials import lookup as remembered_denial
from ratelimits.engine.denials import remember as remember_denial
from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.receipt import receipt_of
from ratelimits.engine.reporting.near_limit import crossed as crossed_near_limit
from ratelimits.engine.reporting.observers import report
from ratelimits.engine.reporting.shadow_log import shadow_log
from ratelimits.engine.steps import ServerFailed
from ratelimits.engine.store import breaker as breakers
from ratelimits.engine.store import connection, errors
from ratelimits.engine.store.route import BreakerOpen
from ratelimits.engine.traffic.record import tally as tally_traffic
from ratelimits.exceptions import ConfigurationError

logger = logging.getLogger("ratelimits")


class Attempt:
    """The decision of ``checks``, recording or not, at ``now`` (seconds; ``None``: the
    Redis clock). :attr:`answer` is set when a remembered denial answers it at once."""

    __slots__ = ("answer", "checks", "local", "record", "seen", "sent_at", "started")

    def __init__(self, checks: Sequence[Check], record: bool, now: float | None) -> None:
        self.checks, self.record = checks, record
        self.started = time.perf_counter()
        self.answer: Verdict | None = None
        # Only requests on the Redis clock use and feed the worker's remembered denials.
        self.local = record and now is None
        if self.local:
            self.sent_at = time.monotonic()
            denied = remembered_denial(checks, self.sent_at)
            if denied is not None:
                tally_traffic(checks, denied)
                _report(denied, self.started, "local")
                self.answer = denied
            self.seen = denials_generation()
        if self.answer is None:
            blocked = blocked_verdict(checks)
            if blocked is not None:  # a block-list override: denied with no call
                if record:
                    _report(blocked, self.started, "local")
                self.answer = blocked

    def decided(self, reply: protocol.Reply) -> Verdict:
        """The verdict of ``reply``; remembers the denials it teaches, makes the receipt
        of what a response may give back, and counts a recorded request."""
        checks = self.checks
        _, verdict = verdict_from(checks, reply)
        if self.local:
            for index, (check, decision) in enumerate(zip(checks, verdict.decisions, strict=True)):
                blocked_us = protocol.field(reply, index, protocol.BLOCKED_US)
                # Units a response gives back free before the time Redis could tell.
                if blocked_us > 0 and not check.policy.gives_back:
                    remember_denial(
                        check, decision, blocked_us / 1_000_000, self.sent_at, self.seen
                    )
        if self.record:
            for check in checks:  # no call at all on the usual request, which holds nothing
                if check.policy.gives_back:
                    verdict.receipt = receipt_of(checks, reply)
                    break
            if verdict.allowed:
                verdict.near_limit = crossed_near_limit(checks, verdict.decisions)
            tally_traffic(checks, verdict, now=protocol.now_us(reply) / 1_000_000)
            _report(verdict, self.started, "redis")
        return verdict

    def failed(self, error: Exception) -> Verdict:
        """The fail verdict after ``error``; errors that are not Redis's are raised."""
        if isinstance(error, ServerFailed):
            cause = error.error
            if errors.is_pool_busy(cause):  # our side, not the server: not counted
                breakers.pool_busy(cause)
            elif errors.is_outage(cause):  # logged once, by the breaker when it opens
                error.guard.failure(cause)
            else:
                logger.error("ratelimits: the decide script failed for %s: %s", error.key, cause)
        elif isinstance(error, ConfigurationError):
            breakers.breaker.failure(error)
        elif not isinstance(error, (BreakerOpen, connection.Unreachable)):
            raise error
        verdict = fail_verdict(self.checks)
        if self.record:  # a look that records nothing is not counted
            report(verdict, time.perf_counter() - self.started, "fallback")
        return verdict


def blocked_verdict(checks: Sequence[Check]) -> Verdict | None:
    """The denial of a request that an enforcing override of limit 0 blocks (a block-list:
    every request of its client is denied, with no Redis call, as an exemption admits
    with none); ``None`` when none does. Retry-After is the policy's window: a block
    lasts as long as its override."""
    found = None
    for check in checks:
        policy = check.policy
        if policy.limit == 0 and policy.enforce:
            window = float(policy.window)
            denied = Decision(
                policy=policy.name,
                identity=check.identity,
                allowed=False,
                enforce=True,
                limit=0,
                window=policy.window,
                count=0.0,
                remaining=0,
                retry_after=window,
                reset=window,
            )
            found = [denied] if found is None else [*found, denied]
    return None if found is None else Verdict(tuple(found))


def _report(verdict: Verdict, started: float, source: str) -> None:
    """Count a recorded request that took from ``started`` (``perf_counter``) until now,
    answered from ``source`` (see :data:`ratelimits.engine.reporting.observers.SOURCES`)."""
    report(verdict, time.perf_counter() - started, source)
    for decision in verdict.decisions:
        if decision.shadow_denied:  # logged once per client and window
            shadow_log.would_deny(decision)
