"""The app's per-process state, forgotten between tests."""

from __future__ import annotations


def reset_state() -> None:
    """Forget the policy table, the Redis client, the breakers, the unsent request
    counts (stopping the metrics flusher) and the shadow log's clients of this process."""
    from ratelimits.engine.reporting import stats
    from ratelimits.engine.reporting.shadow_log import shadow_log
    from ratelimits.engine.store import breaker, connection
    from ratelimits.engine.table import current as table

    stats.reset()
    table.reset()
    connection.reset()
    breaker.reset_all()
    shadow_log.reset()
