"""Access log formats: one line of text to a :class:`LogLine`, or :class:`BadLine` saying why not.

- ``combined`` and ``common``: nginx's and Apache's (``$remote_addr - $remote_user
  [$time_local] "$request" $status $body_bytes_sent``, then for ``combined`` the referer and
  the user agent). A third quoted field after them, as nginx's ``main`` format logs
  ``"$http_x_forwarded_for"``, is read as the X-Forwarded-For header.
- ``json``: one object per line (nginx's ``log_format ... escape=json``); the fields are
  found under the names of :data:`DEFAULT_FIELDS`, or those ``--field`` gives.
- ``csv``: a header line naming the fields (the same names), then one row per line.

Times keep their precision to the microsecond: ``[10/Oct/2026:13:55:36.250 +0000]``, an ISO
8601 time with a fraction, or epoch seconds with decimals (nginx's ``$msec``).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import urlsplit

#: The formats, as ``--format`` names them.
FORMATS = ("combined", "common", "json", "csv")


@dataclass(slots=True)
class LogLine:
    """One request as the log shows it."""

    #: Microseconds since the epoch.
    time_us: int
    address: str
    method: str
    #: The path without its query string.
    path: str
    status: int | None = None
    #: The user field (``None`` for ``-`` or blank).
    user: str | None = None
    #: The logged X-Forwarded-For header, when the log carries it.
    forwarded_for: str | None = None
    #: Every field of a JSON or CSV line by name (``None`` for the text formats).
    fields: Mapping[str, object] | None = None


class BadLine(Exception):
    """A line that cannot be read as a request; its message is the reason."""


#: What each part of a request is called in a JSON or CSV log, first found first.
DEFAULT_FIELDS: dict[str, tuple[str, ...]] = {
    "time": ("time", "time_iso8601", "msec", "timestamp", "@timestamp", "time_local", "ts"),
    "address": ("remote_addr", "client_ip", "ip", "remote_ip", "address"),
    "user": ("remote_user", "user", "username"),
    "path": ("request_uri", "path", "uri", "url"),
    "method": ("request_method", "method"),
    "request": ("request",),
    "status": ("status", "status_code"),
    "forwarded_for": ("http_x_forwarded_for", "x_forwarded_for", "forwarded_for"),
}
#: The parts a line must have (a JSON or CSV line may give ``request`` for both method and
#: path).
REQUIRED = ("time", "address", "method", "path")

_CLF = re.compile(
    r'(?P<address>\S+) \S+ (?P<user>\S+) \[(?P<time>[^\]]+)\] "(?P<request>[^"]*)" '
    r"(?P<status>\d{3}|-) (?:\d+|-)"
    r'(?: "(?:[^"\\]|\\.)*" "(?:[^"\\]|\\.)*"(?: "(?P<xff>(?:[^"\\]|\\.)*)")?)?'
)
_COMBINED_TAIL = re.compile(r'.*\] "[^"]*" (?:\d{3}|-) (?:\d+|-) "')
_MONTHS = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: An epoch number above this is in milliseconds (the year 5138 in seconds).
_MILLISECONDS_FROM = 10**11


#: Seconds of the times read lately, by their text up to the seconds and the zone.
_SECONDS_CACHE: dict[str, int] = {}


def clf_time_us(text: str) -> int:
    """``10/Oct/2026:13:55:36 +0000`` (a ``.250`` fraction after the seconds allowed) in
    microseconds since the epoch."""
    head, _, zone = text.partition(" ")
    seconds_text, _, fraction = head.partition(".")
    key = seconds_text + zone
    base = _SECONDS_CACHE.get(key)
    if base is None:
        try:
            day, month, rest = seconds_text.split("/", 2)
            year, hour, minute, second = rest.split(":")
            offset = _offset(zone)
            when = datetime(
                int(year), _MONTHS[month], int(day), int(hour), int(minute), int(second),
                tzinfo=offset,
            )  # fmt: skip
        except (ValueError, KeyError):
            raise BadLine(f"time {text!r} is not like 10/Oct/2026:13:55:36 +0000") from None
        base = _micros(when)
        if len(_SECONDS_CACHE) > 4096:
            _SECONDS_CACHE.clear()
        _SECONDS_CACHE[key] = base
    return base + _fraction_us(fraction, text)


def _offset(zone: str) -> timezone:
    if len(zone) != 5 or zone[0] not in "+-" or not zone[1:].isdigit():
        raise ValueError(zone)
    minutes = int(zone[1:3]) * 60 + int(zone[3:5])
    return timezone(timedelta(minutes=-minutes if zone[0] == "-" else minutes))


def _fraction_us(fraction: str, text: str) -> int:
    if not fraction:
        return 0
    if not fraction.isdigit():
        raise BadLine(f"time {text!r} has a fraction that is not digits")
    return int((fraction + "000000")[:6])


def _micros(when: datetime) -> int:
    delta = when - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def time_us(value: object) -> int:
    """A JSON or CSV time in microseconds since the epoch: epoch seconds (decimals kept;
    milliseconds when it is that large), ISO 8601 (a zone, else UTC) or the common log
    format's time."""
    if isinstance(value, bool) or value is None:
        raise BadLine(f"time {value!r} is not a time")
    if isinstance(value, int | float):
        return _epoch_us(str(value))
    if not isinstance(value, str):
        raise BadLine(f"time {value!r} is not a time")
    text = value.strip()
    if text and (text[0].isdigit() or text[0] == "-") and text.replace(".", "", 1).isdigit():
        return _epoch_us(text)
    if "/" in text[:8]:
        return clf_time_us(text.strip("[]"))
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadLine(f"time {value!r} is neither epoch seconds nor ISO 8601") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return _micros(when)


def _epoch_us(text: str) -> int:
    whole, _, fraction = text.partition(".")
    if "e" in text.lower():  # a float JSON wrote in exponent form
        return round(float(text) * 1_000_000)
    seconds = int(whole)
    if seconds >= _MILLISECONDS_FROM:  # milliseconds since the epoch
        return seconds * 1000 + int((fraction + "000")[:3] or 0)
    return seconds * 1_000_000 + _fraction_us(fraction, text)


def request_parts(request: str) -> tuple[str, str]:
    """``(method, path)`` of a request line ``GET /a?b HTTP/1.1``."""
    parts = request.split(" ")
    if len(parts) < 2 or not parts[0].isalpha():
        raise BadLine(f"request {request[:80]!r} is not like 'GET /path HTTP/1.1'")
    return parts[0].upper(), clean_path(parts[1])


def clean_path(target: str) -> str:
    """The path of a request target: without query string or fragment; an absolute URL's
    path."""
    if not target.startswith("/"):
        if "://" not in target:
            raise BadLine(f"path {target[:80]!r} does not start with /")
        target = urlsplit(target).path or "/"
    end = len(target)
    for mark in "?#":
        found = target.find(mark)
        if found != -1:
            end = min(end, found)
    return target[:end]


def _user(text: str | None) -> str | None:
    return None if text is None or text in ("", "-") else text


def parse_clf(text: str, *, combined: bool) -> LogLine:
    """A ``combined`` or ``common`` line."""
    found = _CLF.match(text)
    if found is None:
        raise BadLine("not a line of the common or combined log format")
    method, path = request_parts(found["request"])
    status = found["status"]
    xff = found["xff"]
    return LogLine(
        time_us=clf_time_us(found["time"]),
        address=found["address"],
        method=method,
        path=path,
        status=None if status == "-" else int(status),
        user=_user(found["user"]),
        forwarded_for=None if xff in (None, "", "-") else xff,
    )


class FieldReader:
    """Reads a :class:`LogLine` from a JSON or CSV line's fields, under the names
    :data:`DEFAULT_FIELDS` gives or ``names`` (a part to a field name) replaces."""

    def __init__(self, names: Mapping[str, str] | None = None) -> None:
        names = dict(names or {})
        unknown = sorted(set(names) - set(DEFAULT_FIELDS))
        if unknown:
            known = ", ".join(DEFAULT_FIELDS)
            raise ValueError(f"--field {unknown[0]}: not a part of a request (one of {known})")
        self.names: dict[str, tuple[str, ...]] = {
            part: ((names[part],) if part in names else found)
            for part, found in DEFAULT_FIELDS.items()
        }

    def _get(self, fields: Mapping[str, object], part: str) -> object:
        for name in self.names[part]:
            value = fields.get(name)
            if value not in (None, ""):
                return value
        return None

    def read(self, fields: Mapping[str, object]) -> LogLine:
        when = self._get(fields, "time")
        address = self._get(fields, "address")
        method = self._get(fields, "method")
        path = self._get(fields, "path")
        if method is None or path is None:
            request = self._get(fields, "request")
            if isinstance(request, str):
                method, path = request_parts(request)
        for part, value in (("time", when), ("address", address), ("method", method)):
            if value is None:
                raise BadLine(f"no {part} field ({' or '.join(self.names[part])})")
        if path is None:
            raise BadLine(f"no path field ({' or '.join(self.names['path'] + ('request',))})")
        status = self._get(fields, "status")
        try:
            status_code = None if status in (None, "-") else int(str(status))
        except ValueError:
            raise BadLine(f"status {status!r} is not a number") from None
        forwarded = self._get(fields, "forwarded_for")
        user = self._get(fields, "user")
        return LogLine(
            time_us=time_us(when),
            address=str(address),
            method=str(method).upper(),
            path=clean_path(str(path)),
            status=status_code,
            user=_user(None if user is None else str(user)),
            forwarded_for=None if forwarded in (None, "-") else str(forwarded),
            fields=fields,
        )


def parse_json(text: str, reader: FieldReader) -> LogLine:
    """A JSON lines log's line."""
    try:
        fields = json.loads(text)
    except ValueError:
        raise BadLine("not a JSON object") from None
    if not isinstance(fields, dict):
        raise BadLine("not a JSON object")
    return reader.read(fields)


class CsvReader:
    """A CSV log's rows under the header it read first (:meth:`header`)."""

    def __init__(self, reader: FieldReader) -> None:
        self.reader = reader
        self.columns: list[str] | None = None

    def header(self, text: str) -> None:
        self.columns = [name.strip() for name in next(csv.reader([text]))]

    def parse(self, text: str) -> LogLine:
        if self.columns is None:
            self.header(text)
            raise _Header
        row = next(csv.reader([text]), [])
        if len(row) != len(self.columns):
            raise BadLine(f"{len(row)} fields where the header names {len(self.columns)}")
        return self.reader.read(dict(zip(self.columns, row, strict=True)))


class _Header(Exception):
    """The line was a CSV header: no request, no problem."""


HEADER = _Header


def detect(first: str) -> str | None:
    """The format of a log whose first non-blank line is ``first``; ``None`` when none
    fits."""
    text = first.strip()
    if text.startswith("{"):
        return "json"
    if _CLF.match(text):
        return "combined" if _COMBINED_TAIL.match(text) else "common"
    names = {name.strip().strip('"') for name in text.split(",")}
    if len(names) > 1 and any(name in names for name in DEFAULT_FIELDS["time"]):
        return "csv"
    return None


def parser_for(fmt: str, reader: FieldReader) -> Callable[[str], LogLine]:
    """A new line parser for ``fmt`` (a CSV one keeps its file's header: one per file)."""
    if fmt == "combined":
        return lambda text: parse_clf(text, combined=True)
    if fmt == "common":
        return lambda text: parse_clf(text, combined=False)
    if fmt == "json":
        return lambda text: parse_json(text, reader)
    if fmt == "csv":
        return CsvReader(reader).parse
    raise ValueError(f"unknown log format {fmt!r} (one of {', '.join(FORMATS)})")
