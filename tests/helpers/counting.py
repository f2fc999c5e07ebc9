"""Counting a request's decisions in the dashboard's buffer without deciding one."""

from __future__ import annotations

from ratelimits.engine import stats
from ratelimits.engine.decision import Verdict, outcomes


def count_verdict(verdict: Verdict, *, now: float | None = None) -> None:
    """Count ``verdict``'s decisions in this process's buffer, as the limiter's report
    does for a decided request. ``now``: seconds since the epoch, which decide the minute."""
    stats.count(outcomes(verdict), now=now)
