"""Counting admissions in windows from client-side times, soundly.

The load knows when it sent a request and when the answer came back, not when Redis
decided it; the decision lies somewhere in ``[send, recv]``. So an admission counts in a
window only when its whole interval lies inside the window: the count found is at most
the true one, and a count over the limit is a real over-admission, never an artefact of
timing. Each function takes one client's admissions under one policy (intervals sorted
by ``send``) and adds what it finds to a :class:`Tally`.

- :func:`sliding` (``sliding_log``, ``compact_log``): any interval of ``window`` seconds
  holds at most ``limit``. It is enough to try the windows that open at an admission's
  ``send``: moving a window's start to the earliest ``send`` inside it keeps every
  admission it held.
- :func:`aligned` (``fixed_window``, calendar periods; ``sliding_counter``, whose
  estimate is at least the current window's count): each period holds at most ``limit``.
- :func:`gcra` (``token_bucket``): ``k`` admissions decided within ``span`` seconds obey
  ``k <= burst + span / T`` (``T = window / limit``): each adds ``T`` to the bucket's
  level, which drains one second a second and never exceeds ``burst * T``. With the
  limit changed inside the span, ``k <= (burst * T_max + span) / T_min``.
- :func:`concurrent` (``concurrency``): a request's slot is held from its decision until
  its response is done, at least the view's ``hold`` seconds, so certainly during
  ``[recv - hold, send + hold]``; at no instant do more such intervals overlap than the
  limit.

``limit_at(a, b)`` is the most the limit was anywhere in ``[a, b]`` (an edit's old limit
stays possible until a while after it, see :mod:`soak.checker`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Interval = tuple[float, float]
LimitAt = Callable[[float, float], int]
#: Seconds taken off each window's end: Redis's edges are exclusive to the microsecond.
EPSILON = 0.001
#: Windows over their bound that a tally describes.
EXAMPLES = 5


@dataclass
class Tally:
    """What the windows of a policy held: how many were tried, the fullest one, the most
    any went over its bound (0 or less: none did), and a few that went over."""

    windows: int = 0
    peak: int = 0
    peak_bound: int = 0
    worst: float = -math.inf
    over: list[str] = field(default_factory=list)
    over_count: int = 0

    def see(self, count: int, bound: float, where: str) -> None:
        self.windows += 1
        if count > self.peak or (count == self.peak and bound < self.peak_bound):
            self.peak, self.peak_bound = count, int(bound)
        self.worst = max(self.worst, count - bound)
        if count > bound:
            self.over_count += 1
            if len(self.over) < EXAMPLES:
                self.over.append(f"{where}: {count} admitted, bound {bound:g}")

    @property
    def held(self) -> bool:
        return self.over_count == 0


def sliding(
    admitted: Sequence[Interval], window: float, limit_at: LimitAt, tally: Tally, who: str
) -> None:
    for i, (start, _) in enumerate(admitted):
        end = start + window - EPSILON
        count = 0
        for send, recv in admitted[i:]:
            if send > end:
                break
            if recv <= end:
                count += 1
        tally.see(count, limit_at(start, end), f"{who}, window from {start:.3f}")


def aligned(
    admitted: Sequence[Interval],
    period: Callable[[float], Interval],
    limit_at: LimitAt,
    tally: Tally,
    who: str,
) -> None:
    counts: dict[Interval, int] = {}
    for send, recv in admitted:
        bounds = period(send)
        if recv < bounds[1]:  # inside one period
            counts[bounds] = counts.get(bounds, 0) + 1
    for (start, end), count in sorted(counts.items()):
        tally.see(count, limit_at(start, end), f"{who}, period from {start:.3f}")


def gcra(
    admitted: Sequence[Interval],
    window: float,
    limits_in: Callable[[float, float], tuple[int, int]],
    burst: int,
    tally: Tally,
    who: str,
) -> None:
    """``limits_in(a, b)``: the least and the most the limit was in ``[a, b]``."""
    for i, (start, _) in enumerate(admitted):
        horizon = start + window
        ends = []
        for send, recv in admitted[i:]:
            if send > horizon:
                break
            ends.append(recv)
        for k, end in enumerate(sorted(ends), start=1):
            low, high = limits_in(start, end)
            slowest, fastest = window / low, window / high
            bound = math.floor((burst * slowest + (end - start)) / fastest + 1e-6)
            tally.see(k, bound, f"{who}, {k} within {end - start:.3f} s from {start:.3f}")


def concurrent(
    admitted: Sequence[Interval], hold: float, limit_at: LimitAt, tally: Tally, who: str
) -> None:
    events: list[tuple[float, int]] = []
    for send, recv in admitted:
        held_from, held_to = recv - hold, send + hold
        if held_from < held_to:
            events += [(held_from, 1), (held_to, -1)]
    events.sort(key=lambda event: (event[0], event[1]))  # an end before a start at a tie
    now = 0
    for at, step in events:
        now += step
        if step > 0:
            tally.see(now, limit_at(at, at), f"{who}, at {at:.3f}")
