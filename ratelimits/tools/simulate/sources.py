"""Reading access log files: plain or gzipped, ``-`` for standard input; each file's lines
parsed in its format (detected from its first line unless given), one at a time."""

from __future__ import annotations

import gzip
import io
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from ratelimits.tools.simulate.formats import HEADER, BadLine, FieldReader, LogLine, detect
from ratelimits.tools.simulate.formats import parser_for as _parser_for
from ratelimits.tools.simulate.problems import Problems

#: Bytes looked at to tell a binary file from a log.
_SNIFF = 8192
_GZIP_MAGIC = b"\x1f\x8b"
#: A line longer than this is skipped unread (a log line is a few hundred bytes).
MAX_LINE = 64 * 1024


@dataclass(slots=True)
class Entry:
    """A parsed line, with where it came from."""

    line: LogLine
    source: int
    number: int


def _open(path: str) -> IO[bytes]:
    """The bytes of ``path`` (``-``: standard input), unzipped when gzipped."""
    raw: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[arg-type]
    if buffered.peek(2)[:2] == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=buffered)  # type: ignore[return-value]
    return buffered


class LogFile:
    """One log file's requests, in the file's order: :meth:`entries` yields an
    :class:`Entry` per line that parses and counts the others in ``problems``."""

    def __init__(
        self,
        path: str,
        index: int,
        problems: Problems,
        *,
        fmt: str | None = None,
        reader: FieldReader | None = None,
    ) -> None:
        self.path = path
        self.name = "stdin" if path == "-" else path
        self.index = index
        self.problems = problems
        self.fmt = fmt
        self.reader = reader or FieldReader()
        #: Lines read from the file (blank ones left out), and their bytes (unzipped).
        self.lines = 0
        self.bytes = 0

    def entries(self) -> Iterator[Entry]:
        try:
            stream = _open(self.path)
        except OSError as e:
            self.problems.bad_file(self.name, f"cannot be read: {e.strerror or e}")
            return
        try:
            yield from self._read(stream)
        except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as e:
            self.problems.bad_file(self.name, f"stopped reading after line {self.lines}: {e}")
        finally:
            if self.path != "-":
                stream.close()

    def _read(self, stream: IO[bytes]) -> Iterator[Entry]:
        head = stream.peek(_SNIFF)[:_SNIFF] if hasattr(stream, "peek") else b""
        if b"\x00" in head:
            self.problems.bad_file(self.name, "is a binary file, not a log")
            return
        parse = None
        number = 0
        for raw in stream:
            number += 1
            self.bytes += len(raw)
            if len(raw) > MAX_LINE:
                self.lines += 1
                self.problems.skip(self.name, number, f"line longer than {MAX_LINE} bytes")
                continue
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not text.strip():
                continue
            self.lines += 1
            if "\x00" in text:
                self.problems.skip(self.name, number, "binary data in the line")
                continue
            if parse is None:
                fmt = self.fmt or detect(text)
                if fmt is None:
                    self.problems.bad_file(self.name, "is in no known log format (give --format)")
                    self.lines -= 1
                    return
                parse = _parser_for(fmt, self.reader)
            try:
                line = parse(text)
            except HEADER:
                self.lines -= 1
                continue
            except BadLine as e:
                self.problems.skip(self.name, number, str(e))
                continue
            yield Entry(line, self.index, number)
        if number == 0 or (self.lines == 0 and parse is None):
            self.problems.bad_file(self.name, "is empty")
