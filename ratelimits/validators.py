"""Internal, not part of the public API (see docs/api.md).

Validation rules for policy fields, shared by the model, its constraints and the admin."""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ValidationError

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT")
MAX_WINDOW = 30 * 24 * 3600
#: The highest limit: PostgreSQL's integer column holds it, and the Lua script counts
#: exactly in doubles (exact to 2**53) and replies in Redis integers.
MAX_LIMIT = 2**31 - 1
#: Most keys one policy's budget may be split over (``Policy.shards``).
MAX_SHARDS = 64
#: The longest lockout, seconds (30 days, as the longest window).
MAX_LOCKOUT = MAX_WINDOW
#: The shortest and longest IPv6 prefix a policy may count clients by (``Policy.ipv6_prefix``).
MIN_IPV6_PREFIX = 16
MAX_IPV6_PREFIX = 128
HEADER_PREFIX = "header:"

# RFC 9110 field-name: a token. Patterns end in \Z, not $, which would accept a final newline;
# they are used both in Python and in the database constraints.
HEADER_NAME_PATTERN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}"
METHOD_ALTERNATIVES = "|".join(HTTP_METHODS)
METHODS_PATTERN = rf"^(({METHOD_ALTERNATIVES})(,({METHOD_ALTERNATIVES}))*)?\Z"
#: Whitespace as Python's ``\s`` knows it, spelled out: the constraint must refuse what the
#: form refuses, and a database's own ``\s`` may know less (PostgreSQL's misses U+00A0).
WHITESPACE = "\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
ENDPOINT_PATTERN = "^[^" + WHITESPACE + "]+" + r"\Z"
NAME_PATTERN = r"^[-a-zA-Z0-9_]+\Z"

_HEADER_RE = re.compile(rf"^{HEADER_NAME_PATTERN}\Z")


def normalize_methods(value: str) -> str:
    """``" get, post,GET"`` -> ``"GET,POST"``; unknown methods raise ``ValidationError``."""
    parts = [part.strip().upper() for part in (value or "").split(",")]
    parts = [part for part in parts if part]
    unknown = [part for part in parts if part not in HTTP_METHODS]
    if unknown:
        raise ValidationError(
            "Unknown HTTP method(s): %(unknown)s. Use a comma-separated list of %(known)s, "
            "or leave blank for every method.",
            code="invalid_methods",
            params={"unknown": ", ".join(unknown), "known": ", ".join(HTTP_METHODS)},
        )
    return ",".join(sorted(set(parts), key=HTTP_METHODS.index))


def validate_methods(value: str) -> None:
    normalize_methods(value)


def header_name_problem(key: str) -> ValidationError | None:
    """Why a ``header:<Name>`` key's name is no HTTP header name; ``None`` for a good one or
    a key that names no header."""
    if not key.startswith(HEADER_PREFIX) or _HEADER_RE.match(key[len(HEADER_PREFIX) :]):
        return None
    return ValidationError(
        "%(name)r is not a valid HTTP header name: use 1 to 64 letters, digits or "
        "!#$%%&'*+.^_`|~- (for example header:X-Api-Key).",
        code="invalid_header_name",
        params={"name": key[len(HEADER_PREFIX) :]},
    )


#: Separates the names of an endpoint that lists several (``accounts,api:payments``).
ENDPOINT_SEPARATOR = ","
#: What starts a path glob endpoint.
GLOB_STARTS = ("/", "*")


def endpoint_names(endpoint: str) -> tuple[str, ...]:
    """The names (throttle scopes, URL names) an endpoint matches: itself, or each one it
    lists, comma-separated; none for a path glob (it starts with ``/`` or ``*``)."""
    if endpoint.startswith(GLOB_STARTS):
        return ()
    return tuple(endpoint.split(ENDPOINT_SEPARATOR))


def validate_endpoint(value: str) -> None:
    """Not blank and without whitespace: a throttle scope, a URL name, a comma-separated
    list of them, or a path glob."""
    if not (value or "").strip():
        raise ValidationError("The endpoint cannot be blank.", code="blank_endpoint")
    if not re.match(ENDPOINT_PATTERN, value.strip()):
        raise ValidationError(
            "The endpoint cannot contain spaces: use a throttle scope (search), a URL name "
            "(api:search), several of them comma-separated (search,api:orders) or a path "
            "glob (/api/search/*).",
            code="invalid_endpoint",
        )
    names = endpoint_names(value.strip())
    if len(names) > 1 and not all(name and not name.startswith(GLOB_STARTS) for name in names):
        raise ValidationError(
            "A list of names holds throttle scopes and URL names, comma-separated, none "
            "empty and none a path glob: search,api:orders. A path glob stands alone.",
            code="invalid_endpoint_list",
        )


def validate_time_zone(value: str) -> None:
    """An IANA time zone name this machine knows (``Europe/Berlin``); blank is allowed."""
    if not value:
        return
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            "%(value)r is not a known time zone: use an IANA name such as Europe/Berlin, "
            "America/New_York or UTC, or leave blank for the site's TIME_ZONE.",
            code="invalid_time_zone",
            params={"value": value},
        ) from None


def header_name(key: str) -> str | None:
    """The header name of a ``header:<Name>`` key, else ``None``."""
    if key.startswith(HEADER_PREFIX):
        name = key[len(HEADER_PREFIX) :]
        return name if _HEADER_RE.match(name) else None
    return None
