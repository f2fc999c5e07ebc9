"""Shadow mode's log: one line per policy and client per window, in bounded memory.

A shadow policy lets every request through and logs the ones it would deny. A line per
such request would let one client flood the log (a shadow policy is often tried on a busy
endpoint), so a worker logs a client's first would-be denial under a policy, then stays
quiet about that client and policy for the policy's window (at most :data:`QUIET_MAX`
seconds), and its next line says how many it did not log in between.

The clients logged recently are remembered in one dict of at most :data:`CAPACITY`
entries per process, so a client minting identities (a new ``X-Api-Key`` each request)
cannot grow a worker's memory: once it is full (after dropping the entries whose quiet
time is over, at most once a second), a would-be denial of a client not in it is counted
per policy, and those counts are logged as one summary line per policy at most every
:data:`SUMMARY_INTERVAL` seconds. Every would-be denial is still counted exactly in the
metrics and the dashboard (``shadow_denied``); only the log is aggregated.

Identities are logged as the keys hold them: an address, a user's pk, or a keyed hash of
a secret (an API key, an API client, an attempted username), never the secret itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ratelimits.conf import resets_process_state

logger = logging.getLogger("ratelimits")

#: Most (policy, client) pairs a worker remembers having logged.
CAPACITY = 10_000
#: Longest a worker stays quiet about one client of one policy, seconds (a calendar
#: month's policy would otherwise log a client once a month).
QUIET_MAX = 3600.0
#: Least time between two summary lines of one policy's unlogged would-be denials.
SUMMARY_INTERVAL = 60.0
#: Least time between two sweeps of a full table for entries whose quiet time is over.
_SWEEP_INTERVAL = 1.0


class ShadowLog:
    """Decides which would-be denials are logged; thread-safe."""

    def __init__(
        self,
        capacity: int = CAPACITY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity = capacity
        self._clock = clock
        self._lock = threading.Lock()
        #: (policy, identity) -> [quiet until, would-be denials not logged since].
        self._seen: dict[tuple[str, str], list[Any]] = {}
        #: policy -> would-be denials of clients the full table could not take.
        self._unlogged: dict[str, int] = {}
        self._next_summary: dict[str, float] = {}
        self._next_sweep = 0.0

    def __len__(self) -> int:
        return len(self._seen)

    def would_deny(self, decision: Any) -> None:
        """Log ``decision`` (a shadow policy's would-be denial) unless its client was
        logged under its policy within the quiet time."""
        now = self._clock()
        policy, identity = decision.policy, decision.identity
        pair = (policy, identity)
        with self._lock:
            entry = self._seen.get(pair)
            if entry is not None and entry[0] > now:
                entry[1] += 1
                return
            skipped = entry[1] if entry is not None else 0
            if entry is None and len(self._seen) >= self.capacity:
                self._sweep(now)
            if entry is None and len(self._seen) >= self.capacity:
                unlogged = self._unlogged.get(policy, 0) + 1
                if now < self._next_summary.get(policy, 0.0):
                    self._unlogged[policy] = unlogged
                    return
                self._unlogged[policy] = 0
                self._next_summary[policy] = now + SUMMARY_INTERVAL
                summary = True
            else:
                quiet = min(float(decision.window), QUIET_MAX)
                self._seen[pair] = [now + quiet, 0]
                summary = False
        if summary:
            logger.info(
                "ratelimits: shadow policy %s would deny %d requests of clients not logged "
                "one by one (more than %d clients logged recently); let through.",
                policy,
                unlogged,
                self.capacity,
            )
            return
        logger.info(
            "ratelimits: shadow policy %s would deny %s (%.0f of %d per %d s); let through.%s",
            policy,
            identity,
            decision.count,
            decision.limit,
            decision.window,
            f" {skipped} more since the last line." if skipped else "",
        )

    def _sweep(self, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + _SWEEP_INTERVAL
        for pair in [pair for pair, entry in self._seen.items() if entry[0] <= now]:
            del self._seen[pair]

    def reset(self) -> None:
        with self._lock:
            self._seen.clear()
            self._unlogged.clear()
            self._next_summary.clear()
            self._next_sweep = 0.0


#: The process's shadow log (:func:`ratelimits.engine.limiter.decide` writes to it).
shadow_log = ShadowLog()
resets_process_state(shadow_log.reset)
