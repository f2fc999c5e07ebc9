"""Percentiles of a distribution of whole numbers, by nearest rank: what the tools report
about clients' use (``simulate``'s peak per window; a traffic record's levels)."""

from __future__ import annotations

import math
from collections.abc import Iterable

#: The percentiles the reports show, by their JSON names.
REPORTED: tuple[tuple[str, float], ...] = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))


def nearest_rank(ordered: list[int], fraction: float) -> int:
    """The ``fraction`` (0 < fraction <= 1) percentile of ``ordered`` (sorted, not empty)
    by nearest rank: the smallest value that at least that share of the values do not
    exceed."""
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def summary(values: Iterable[int]) -> dict[str, int]:
    """``{"p50", "p90", "p99", "max"}`` of ``values`` (all 0 when there are none)."""
    ordered = sorted(values)
    if not ordered:
        return {name: 0 for name, _ in REPORTED} | {"max": 0}
    found = {name: nearest_rank(ordered, fraction) for name, fraction in REPORTED}
    found["max"] = ordered[-1]
    return found
