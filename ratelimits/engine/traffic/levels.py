"""The scale of use the traffic record counts against: whole numbers 1 to 6, then 8, then
ten steps a decade (the Renard R10 series: 10, 13, 16, 20, 25, 32, 40, 50, 63, 80, 100,
125, 160, ...), about 25 % apart, up to past any limit a policy can have.

A client's use in its window *reaches* a level ``L`` when a request takes it from below
``L`` to ``L`` or more: :func:`crossed` finds the levels one admitted request crosses, from
the count the reply gives (before the request) and the units it spent.
"""

from __future__ import annotations

from bisect import bisect_right

#: The R10 mantissas, whose round numbers the levels from 10 on are.
_R10 = (1.0, 1.25, 1.6, 2.0, 2.5, 3.2, 4.0, 5.0, 6.3, 8.0)


def _scale() -> tuple[int, ...]:
    levels = [1, 2, 3, 4, 5, 6, 8]
    for decade in range(1, 11):  # 10 to 8e10: past a PositiveIntegerField's 2**31
        levels.extend(int(m * 10**decade + 0.5) for m in _R10)
    return tuple(levels)


#: Every level, ascending.
LEVELS: tuple[int, ...] = _scale()
#: ``{level: its index in LEVELS}``, for the usual request (one unit, a whole count).
_INDEX = {level: i for i, level in enumerate(LEVELS)}


def crossed(count: float, units: int) -> tuple[int, ...]:
    """The levels a request of ``units`` crosses when the client's use was ``count``
    before it: every ``L`` with ``count < L <= count + units``. Usually none."""
    if units == 1 and count == int(count):
        level = int(count) + 1
        return (level,) if level in _INDEX else ()
    return LEVELS[bisect_right(LEVELS, count) : bisect_right(LEVELS, count + units)]


def at_or_below(value: float) -> int | None:
    """The highest level ``<= value``; ``None`` below 1."""
    i = bisect_right(LEVELS, value)
    return LEVELS[i - 1] if i else None


def at_or_above(value: float) -> int:
    """The lowest level ``>= value`` (1 for any value up to 1)."""
    i = bisect_right(LEVELS, value)
    if i and LEVELS[i - 1] == value:
        return LEVELS[i - 1]
    return LEVELS[min(i, len(LEVELS) - 1)]


def readable(value: float) -> int:
    """``value`` rounded up to the next level: a number people read at a glance."""
    return at_or_above(max(1.0, value))
