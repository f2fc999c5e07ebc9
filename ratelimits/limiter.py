"""The engine: (policies, identities) -> decisions, in one Redis round trip.

:func:`decide` runs the decide script (see ``lua/decide.lua``) once for every policy that
matches a request, by SHA; redis-py reloads the script on ``NOSCRIPT`` (after a
``SCRIPT FLUSH`` or a Redis restart) and retries, so that recovers without an error.
When Redis cannot answer, or the circuit breaker is open, every policy answers with its
fail mode instead. Nothing here knows about DRF, the admin or HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import redis
from redis.commands.core import Script

from ratelimits import connection, metrics, scripts, stats
from ratelimits.breaker import breaker
from ratelimits.conf import app_settings
from ratelimits.decision import Decision, Verdict
from ratelimits.exceptions import ConfigurationError
from ratelimits.policy_table import CompiledPolicy

logger = logging.getLogger("ratelimits")

REPLY_FIELDS = 5  # allowed, count x 1000, remaining, retry_ms, reset_ms


@dataclass(frozen=True, slots=True)
class Check:
    """One policy to apply to one identity."""

    policy: CompiledPolicy
    identity: str

    @property
    def key(self) -> str:
        return self.policy.key_for(self.identity)


_script: Script | None = None


def _decide_script(client: redis.Redis) -> Script:
    global _script
    if _script is None:
        _script = client.register_script(scripts.decide_source())
    return _script


def decide(checks: Sequence[Check], *, record: bool = True, now: float | None = None) -> Verdict:
    """Decide one request against ``checks``, all or nothing.

    ``record=False`` only looks: nothing is written. ``now`` (seconds since the epoch)
    replaces the Redis clock, for replaying exact timelines in tests.
    """
    if not checks:
        return Verdict()
    if not breaker.allow():
        return _fail_verdict(checks)
    try:
        _, verdict = evaluate(checks, connection.get_client(), record=record, now=now)
    except redis.ResponseError as e:
        if isinstance(e, redis.exceptions.ReadOnlyError):  # a replica after a failover
            breaker.failure(e)
        else:  # the script failed on these keys (say, a foreign value): not an outage
            logger.error("ratelimits: the decide script failed for %s: %s", checks[0].key, e)
        return _fail_verdict(checks)
    except (redis.RedisError, ConfigurationError) as e:
        breaker.failure(e)
        return _fail_verdict(checks)
    breaker.success()
    if record:
        _report(verdict)
    return verdict


def peek(checks: Sequence[Check], client: redis.Redis) -> tuple[int, Verdict]:
    """What ``checks`` would decide now, consuming nothing: ``(now_us, verdict)``.

    For tools (the management command, the admin): no breaker and no fail mode, so a
    Redis error is raised to the caller.
    """
    if not checks:
        return int(client.time()[0]) * 1_000_000, Verdict()
    return evaluate(checks, client, record=False)


def evaluate(
    checks: Sequence[Check], client: redis.Redis, *, record: bool, now: float | None = None
) -> tuple[int, Verdict]:
    """Run the decide script once for ``checks``: ``(now_us, verdict)``; errors are raised."""
    return verdict_from(checks, _run(checks, client, record=record, now=now))


def queue_peek(checks: Sequence[Check], pipeline: redis.client.Pipeline) -> None:
    """Queue a read-only decide call on ``pipeline``; read its reply with :func:`verdict_from`."""
    _run(checks, pipeline, record=False, now=None)


def _run(
    checks: Sequence[Check], client: redis.Redis, *, record: bool, now: float | None
) -> list[int]:
    now_arg = "" if now is None else str(round(now * 1_000_000))
    args: list[str] = [now_arg, "1" if record else "0"]
    for check in checks:
        args.extend(check.policy.script_args)
    return _decide_script(client)(keys=[c.key for c in checks], args=args, client=client)


def verdict_from(checks: Sequence[Check], reply: list[int]) -> tuple[int, Verdict]:
    """``(now_us, verdict)`` from the decide script's reply for ``checks``."""
    return int(reply[1]), Verdict(tuple(_decision(c, reply, i) for i, c in enumerate(checks)))


def _decision(check: Check, reply: list[int], index: int) -> Decision:
    allowed, count_milli, remaining, retry_ms, reset_ms = reply[
        2 + REPLY_FIELDS * index : 2 + REPLY_FIELDS * (index + 1)
    ]
    policy = check.policy
    return Decision(
        policy=policy.name,
        identity=check.identity,
        allowed=bool(allowed),
        enforce=policy.enforce,
        limit=policy.limit,
        window=policy.window,
        count=count_milli / 1000,
        remaining=int(remaining),
        retry_after=retry_ms / 1000,
        reset=reset_ms / 1000,
    )


def _fail_verdict(checks: Sequence[Check]) -> Verdict:
    retry_after = float(app_settings.FAIL_CLOSED_RETRY_AFTER)
    verdict = Verdict(
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
    stats.count(verdict)
    metrics.record(verdict)
    return verdict


def _report(verdict: Verdict) -> None:
    stats.count(verdict)
    metrics.record(verdict)
    for decision in verdict.decisions:
        if decision.shadow_denied:
            logger.info(
                "ratelimits: shadow policy %s would deny %s (%.0f of %d per %d s); let through.",
                decision.policy,
                decision.identity,
                decision.count,
                decision.limit,
                decision.window,
            )
