"""What an adoption would write, and what it leaves alone with the reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Adopted:
    """A policy to write (a policy-file row) and what it replaces."""

    row: dict[str, Any]
    replaces: list[str]


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

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [adopted.row for adopted in self.adopted]
