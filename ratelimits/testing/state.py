"""The app's per-process state, forgotten between tests."""

from __future__ import annotations

from ratelimits.conf import reset_registered


def reset_state() -> None:
    """Forget every per-process cache and state of the app: what its modules registered
    with :mod:`ratelimits.conf` (the policy table, the Redis clients, the breakers, the
    unsent request counts, stopping the metrics flusher, the shadow log's clients, and
    every cache built from a setting). The next request starts from the settings, the
    database and Redis alone."""
    reset_registered()
