"""What the checker finds, and what it reads: a topology's history as a :class:`Result`,
each invariant as a :class:`Check`, and the small facts every rule shares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.admission import Tally
from soak.history import (
    FALLBACK,
    FAULTS,
    LEASES,
    MEMORY,
    META,
    RECORDS,
    Fault,
    LeaseLook,
    MemorySample,
    Meta,
    Record,
    read_lines,
    read_meta,
)

#: The faults that edit limits (no Redis to recover).
EDITS = ("lower", "restore")
#: Problems a check describes.
EXAMPLES = 5


@dataclass
class Check:
    name: str
    held: bool
    figures: str
    problems: list[str] = field(default_factory=list)


@dataclass
class Recovery:
    fault: Fault
    #: Seconds from the fault's end until Redis decided again (``None``: not within HORIZON).
    decided: float | None
    #: Seconds from the fault's end to the first 429 Redis decided.
    denied: float | None
    fallbacks: int
    #: After a limit edit: seconds after it that a request was still decided by the old limit.
    stale: float | None = None


@dataclass
class Admissions:
    policy: str
    algorithm: str
    face: str
    judged: Tally
    everything: Tally
    admitted: int
    uncertain: int
    across_wipe: int


@dataclass
class Result:
    """One topology's figures and checks."""

    meta: Meta
    records: list[Record]
    faults: list[Fault]
    memory: list[MemorySample]
    leases: list[LeaseLook]
    recoveries: list[Recovery] = field(default_factory=list)
    admissions: list[Admissions] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def violations(self) -> list[Check]:
        return [check for check in self.checks if not check.held]


def load(directory: Path) -> Result:
    if not (directory / META).exists():
        error = "the run wrote no meta.json: it died or timed out (see its run.log)"
        meta = Meta(directory.name, 0.0, 0.0, 0.0, 0, 0.0, {}, "", error=error)
        return Result(meta, [], [], [], [])
    meta = read_meta(directory / META)
    return Result(
        meta,
        list(read_lines(directory / RECORDS, Record)),
        list(read_lines(directory / FAULTS, Fault)),
        list(read_lines(directory / MEMORY, MemorySample)),
        list(read_lines(directory / LEASES, LeaseLook)),
    )


def kind_of(record: Record) -> str:
    """``admitted``, ``denied``, ``admitted (fail mode)``, ``denied (fail mode)``, ``5xx``,
    ``unanswered`` or ``other``."""
    if record.status == 0:
        return "unanswered"
    if record.status >= 500:
        return "5xx"
    if record.status not in (200, 429):
        return "other"
    kind = "admitted" if record.status == 200 else "denied"
    return f"{kind} (fail mode)" if record.decided == FALLBACK else kind


def active(faults: Sequence[Fault]) -> list[Fault]:
    return [fault for fault in faults if not fault.skipped and not fault.error]
