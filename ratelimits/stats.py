"""In-process counts of decisions per policy (allowed, denied, shadow_denied, failed)."""

from __future__ import annotations

import threading
from collections import Counter

from ratelimits.decision import Verdict
from ratelimits.metrics import outcome

_lock = threading.Lock()
_counts: Counter[tuple[str, str]] = Counter()


def count(verdict: Verdict) -> None:
    """Add one request's decisions to the process's counters."""
    admitted = verdict.allowed
    with _lock:
        for decision in verdict.decisions:
            _counts[(decision.policy, outcome(decision, admitted))] += 1


def snapshot() -> dict[str, dict[str, int]]:
    """``{policy: {outcome: n}}`` since the process started (or :func:`clear`)."""
    with _lock:
        result: dict[str, dict[str, int]] = {}
        for (policy, outcome), n in _counts.items():
            result.setdefault(policy, {})[outcome] = n
        return result


def clear() -> None:
    with _lock:
        _counts.clear()
