"""Counting a request's decisions in the dashboard's buffer without deciding one."""

from __future__ import annotations

from ratelimits.engine.decision import Verdict, outcomes
from ratelimits.engine.reporting import stats


def count_verdict(verdict: Verdict, *, now: float | None = None) -> None:
    """Count ``verdict``'s decisions in this process's buffer, as the limiter's report
    does for a decided request. ``now``: seconds since the epoch, which decide the minute."""
    stats.count(outcomes(verdict), now=now)
