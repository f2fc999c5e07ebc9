"""Who hears about every decided request: the dashboard's counts, then any observer a
face added (Prometheus adds one in ``AppConfig.ready()``).

The limiter calls :func:`report` once per recorded request, with the time it spent and
where the answer came from (one of :data:`SOURCES`). Observers run on the request path:
keep them quick.
"""

from __future__ import annotations

from collections.abc import Callable

from ratelimits.engine.decision import Outcomes, Verdict, outcomes
from ratelimits.engine.reporting.stats import count as count_stats

#: Where an answer came from: ``redis`` (a round trip happened), ``local`` (a remembered
#: denial, no round trip) or ``fallback`` (Redis failed or its breaker was open: the fail
#: mode answered).
SOURCES = ("redis", "local", "fallback")

#: ``observer(outcomes, seconds, source)``: each decision's ``(policy, outcome)``.
Observer = Callable[[Outcomes, float, str], None]

_observers: list[Observer] = []


def add_observer(observer: Observer) -> None:
    """Call ``observer`` for every recorded request from now on (once, however often it
    is added)."""
    if observer not in _observers:
        _observers.append(observer)


def report(verdict: Verdict, seconds: float, source: str) -> None:
    """Count a recorded request that took ``seconds``, answered from ``source``. Each
    decision's outcome is worked out once, for the dashboard's counts and every observer."""
    counted = outcomes(verdict)
    if not counted:
        return
    count_stats(counted)
    for observer in _observers:
        observer(counted, seconds, source)
