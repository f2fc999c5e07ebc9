"""What a replay could not read: lines skipped (with the first few and why), files that
were not logs. Counted, never raised."""

from __future__ import annotations

from dataclasses import dataclass, field

#: How many skipped lines the report shows.
EXAMPLES = 10


@dataclass
class Problems:
    """The lines and files a replay left out, and why."""

    #: Lines left out.
    skipped: int = 0
    #: The first :data:`EXAMPLES` of them: ``{"file", "line", "reason"}``.
    examples: list[dict[str, object]] = field(default_factory=list)
    #: Files that gave no line: ``{"file", "reason"}`` (empty, binary, unreadable).
    files: list[dict[str, str]] = field(default_factory=list)
    #: Lines left out by reason's kind (the reason's text before any colon).
    by_kind: dict[str, int] = field(default_factory=dict)

    def skip(self, source: str, line: int, reason: str) -> None:
        """Line ``line`` of ``source`` was left out for ``reason``."""
        self.skipped += 1
        kind = reason.split(":", 1)[0].split(" (", 1)[0]
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        if len(self.examples) < EXAMPLES:
            self.examples.append({"file": source, "line": line, "reason": reason})

    def bad_file(self, source: str, reason: str) -> None:
        """``source`` gave no line, for ``reason``."""
        self.files.append({"file": source, "reason": reason})

    @property
    def complete(self) -> bool:
        """True when every line of every file was read."""
        return not self.skipped and not self.files
