"""The app's per-process state, forgotten between tests."""

from __future__ import annotations


def reset_state() -> None:
    """Forget the policy table, the Redis client, the breakers, the unsent request
    counts (stopping the metrics flusher) and the shadow log's clients of this process."""
    from ratelimits.engine import stats, table
    from ratelimits.engine.shadow_log import shadow_log
    from ratelimits.engine.store import breaker, connection

    stats.reset()
    table.reset()
    connection.reset()
    breaker.reset_all()
    shadow_log.reset()
