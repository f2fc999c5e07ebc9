"""What an adoption would write, and what it leaves alone with the reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Adopted:
    """A policy to write (a policy-file row), what it replaces (one line per route), and
    those throttles in short (``UserRateThrottle 100/hour``) for the one-line summary."""

    row: dict[str, Any]
    replaces: list[str]
    what: str = ""

    @property
    def summary(self) -> str:
        """``replaces UserRateThrottle 100/hour on 3 routes``."""
        if not self.replaces:
            return self.what
        routes = len(self.replaces)
        return f"replaces {self.what} on {routes} route{'' if routes == 1 else 's'}"


@dataclass
class Skipped:
    """A throttle (or view) adoption writes nothing for, where, and why."""

    what: str
    views: list[str]
    why: str


@dataclass
class AdoptionPlan:
    adopted: list[Adopted] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    #: Policies adopted by an earlier run whose DRF throttles are gone from the URLconf
    #: (the site switched to ``PolicyThrottle``), kept as they are: their names and modes.
    kept: list[tuple[str, str]] = field(default_factory=list)

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [adopted.row for adopted in self.adopted]
