"""Timelines replayed through the limiter at explicit times, for tests and benchmarks."""

from __future__ import annotations

from collections.abc import Sequence

import redis

from ratelimits.engine.pipelined import queue_script
from ratelimits.engine.policy.compiled import Check


def queue_decide(
    checks: Sequence[Check], pipeline: redis.client.Pipeline, *, now: float | None = None
) -> None:
    """Queue a recording decide call on ``pipeline`` (one server, all ``checks`` in one
    slot), at ``now`` (seconds) or the Redis clock. Redis runs queued calls in order, so
    replaying a timeline through one pipeline decides exactly as calling
    :func:`ratelimits.engine.limiter.evaluate` for each request would; read each reply
    with :func:`ratelimits.engine.decision.verdict_from`."""
    queue_script(checks, pipeline, record=True, now=now)
