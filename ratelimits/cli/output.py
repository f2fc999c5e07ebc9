"""Writing results: aligned tables for people, JSON for programs, progress on a terminal."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, TextIO

#: Seconds between two progress lines, and before the first one.
PROGRESS_INTERVAL = 0.5


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[str] = ()
) -> str:
    """``rows`` under ``headers`` in aligned columns; ``numeric`` columns align right."""
    cells = [[text(value) for value in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    right = {i for i, h in enumerate(headers) if h in numeric}

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(widths[i]) if i in right else v.ljust(widths[i]) for i, v in enumerate(values)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(list(headers)), *(line(row) for row in cells)])


def text(value: Any) -> str:
    """A cell: ``-`` for nothing, numbers without noise."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


def seconds(value: float | None) -> str:
    """``41.2 s`` (to a tenth); ``-`` for no value."""
    return "-" if value is None else f"{value:.1f} s"


def count(number: int, noun: str) -> str:
    """``1 key``, ``2,000 keys``."""
    return f"1 {noun}" if number == 1 else f"{number:,} {noun}s"


def as_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False, default=str)


class ProgressLine:
    """A self-erasing progress line on ``stream``, only when it is a terminal and the
    work lasts longer than :data:`PROGRESS_INTERVAL`."""

    def __init__(self, stream: TextIO, total: int | None = None) -> None:
        self.stream: TextIO = getattr(stream, "_out", stream)  # under Django's OutputWrapper
        self.total = total
        self.enabled = bool(getattr(stream, "isatty", lambda: False)())
        self.next_at = time.monotonic() + PROGRESS_INTERVAL
        self.shown = False

    def __call__(self, examined: int, found: int) -> None:
        if not self.enabled or time.monotonic() < self.next_at:
            return
        self.next_at = time.monotonic() + PROGRESS_INTERVAL
        of = f" of {self.total:,}" if self.total else ""
        examined = min(examined, self.total) if self.total else examined
        self.stream.write(f"\rscanning: about {examined:,}{of} keys examined, {found:,} found ")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
