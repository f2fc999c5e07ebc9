"""The algorithms: what Python knows of each entry of ``ALGORITHMS`` in ``lua/prelude.lua``.

One :class:`Algorithm` per Lua file (``lua/<name>.lua``, which registers
``ALGORITHMS.<name>``), in the order the model offers them. Its flags mirror the Lua
entry's (``bursts``, ``released``, ``calendar``); a test holds the two registries to the
same names and flags. Everything else that differs between algorithms (key suffixes,
choices, which limit a cost is measured against, what the tools read from a key) is
looked up here, never spelled out beside the name.

Adding an algorithm: its Lua file, one entry in :data:`ALGORITHMS`, and its measured
memory and work in :mod:`ratelimits.tools.memory`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: What a key of the algorithm holds, as the tools read it: ``"log"`` a sorted set of
#: one admission per entry, scored by its time; ``"ring"`` a string of weighted entries
#: (``lua/compact_log.lua``); ``"leases"`` a sorted set of requests in progress;
#: ``"tat"`` a string holding one time; ``"windows"`` a hash of window counts.
State = Literal["log", "ring", "leases", "tat", "windows"]


@dataclass(frozen=True, slots=True)
class Algorithm:
    """One algorithm as the Python side needs it."""

    #: Its name in policies and in the Lua registry (``ALGORITHMS.<name>``).
    name: str
    #: The model's choice label, as the admin shows it.
    label: str
    #: The last part of its keys (:func:`ratelimits.engine.keys.names.build_key`).
    suffix: str
    #: What its key holds (:data:`State`).
    state: State
    #: Lua's ``bursts = true``: it takes a burst, and the burst, not the limit, is its
    #: capacity (the largest cost it can ever grant).
    bursts: bool = False
    #: Lua's ``released = true``: its units come back when responses end, not with
    #: time (the limit is requests in progress, the window a lease).
    released: bool = False
    #: Lua's ``calendar = true``: its window may be a calendar period.
    calendar: bool = False
    #: Its stored hash keeps the previous window's count too, weighted into the current.
    previous_window: bool = False

    @property
    def keeps_entries(self) -> bool:
        """True when it keeps one entry per admission: its size grows with the limit."""
        return self.state in ("log", "ring")

    @property
    def capacity_slot(self) -> int:
        """The ARGV slot of ``lua/decide.lua`` holding its capacity: 4 (the burst's
        share) for an algorithm with bursts, else 1 (the limit's)."""
        return 4 if self.bursts else 1


ALGORITHMS: tuple[Algorithm, ...] = (
    Algorithm("sliding_log", "Sliding window log (exact)", "log", "log"),
    Algorithm("compact_log", "Compact sliding window log (exact, 8 B per request)", "ring", "ring"),
    Algorithm(
        "sliding_counter",
        "Sliding window counter (approximate, small)",
        "counter",
        "windows",
        previous_window=True,
    ),
    Algorithm("fixed_window", "Fixed window", "fixed", "windows", calendar=True),
    Algorithm(
        "token_bucket",
        "Token bucket (GCRA: a steady rate with bursts)",
        "bucket",
        "tat",
        bursts=True,
    ),
    Algorithm(
        "concurrency",
        "Concurrency (requests in progress at once)",
        "leases",
        "leases",
        released=True,
    ),
)
#: Each algorithm by its name.
BY_NAME: dict[str, Algorithm] = {a.name: a for a in ALGORITHMS}
#: Every algorithm's name, in the model's order.
NAMES: tuple[str, ...] = tuple(BY_NAME)
#: The algorithm of a policy that names none: small at any limit.
DEFAULT = "sliding_counter"
#: The algorithms whose window may be a calendar period.
CALENDAR: tuple[str, ...] = tuple(a.name for a in ALGORITHMS if a.calendar)
#: The algorithms that take a burst.
BURSTING: tuple[str, ...] = tuple(a.name for a in ALGORITHMS if a.bursts)
#: The algorithms whose units come back when responses end.
RELEASED: tuple[str, ...] = tuple(a.name for a in ALGORITHMS if a.released)


def get(name: str) -> Algorithm:
    """The algorithm called ``name``; ``KeyError`` for an unknown one."""
    return BY_NAME[name]


def bursts(name: str) -> bool:
    """True when ``name`` takes a burst (False for an unknown name)."""
    return name in BURSTING


def released(name: str) -> bool:
    """True when ``name``'s units come back when responses end."""
    return name in RELEASED


def keeps_entries(name: str) -> bool:
    """True when ``name`` keeps one entry per admission (a log)."""
    found = BY_NAME.get(name)
    return found is not None and found.keeps_entries


def choices() -> list[tuple[str, str]]:
    """``(name, label)`` of every algorithm, for the model's field."""
    return [(a.name, a.label) for a in ALGORITHMS]


def capacity_slot(name: str) -> int:
    """The ARGV slot holding ``name``'s capacity (:attr:`Algorithm.capacity_slot`)."""
    return 4 if bursts(name) else 1
