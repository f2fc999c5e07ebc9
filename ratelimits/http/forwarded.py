"""Forwarding headers as proxies write them: ``X-Forwarded-For`` and RFC 7239 ``Forwarded``.

Pure parsing, no settings: :mod:`ratelimits.http.proxies` decides whom to believe.

A hop's address (:func:`parse_node`) is read in every form proxies write: ``203.0.113.7``,
``203.0.113.7:4711`` (Azure Application Gateway), ``2001:db8::1``, ``[2001:db8::1]`` and
``[2001:db8::1]:4711`` (RFC 7239 quotes these: ``for="[2001:db8::1]:4711"``). An IPv4-mapped
IPv6 address is its IPv4 address, an IPv6 scope id (``%eth0``, free text) is dropped.
``unknown``, an obfuscated identifier (``_hidden``) and anything else is not an address:
``None``, which stops a walk (:func:`walk`).

Hops are read from the right, one at a time (:func:`x_forwarded_for_hops`,
:func:`forwarded_hops`), as a walk asks for them: what the proxies appended is read
first and whole, whatever text a client wrote to its left, and the walk's first
untrusted hop ends the reading. A header of any length costs as much as the hops the
walk reads, at most :data:`MAX_HOPS`.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Longer than any address with brackets, a scope id and a port that a proxy writes.
_MAX_NODE = 100
#: The most hops a walk reads: more than any chain of proxies writes. A header whose
#: hops are all trusted past this many names no client (``None``).
MAX_HOPS = 20
#: A port after an address: digits, or an RFC 7239 obfuscated port (``_abc``).
_PORT = re.compile(r":(?:[0-9]{1,5}|_[A-Za-z0-9._-]+)")
_QUOTED_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"', re.DOTALL)
_QUOTED_PAIR = re.compile(r"\\(.)", re.DOTALL)


def parse_node(text: str) -> Address | None:
    """The address a hop names (see the module docstring); ``None`` when it names none."""
    text = text.strip()
    if not text or len(text) > _MAX_NODE:
        return None
    return _parse_node(text)


@functools.lru_cache(maxsize=4096)
def _parse_node(text: str) -> Address | None:
    """:func:`parse_node` of stripped text of at most ``_MAX_NODE`` characters. Cached: a
    site sees the same proxies and clients again and again, and a walk parses a few hops
    a request, so a flood of garbage cannot push them out."""
    if text[0] == "[":  # [v6] or [v6]:port
        end = text.find("]")
        if end < 0 or (end + 1 < len(text) and not _PORT.fullmatch(text, end + 1)):
            return None
        host = text[1:end]
        return _address(host) if ":" in host else None  # brackets hold IPv6 only
    if text.count(":") == 1:  # v4:port (a bare IPv6 address has at least two colons)
        host, port = text.split(":")
        if not _PORT.fullmatch(":" + port):
            return None
        address = _address(host)
        return address if isinstance(address, ipaddress.IPv4Address) else None
    return _address(text)


def _address(text: str) -> Address | None:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        address = ipaddress.IPv6Address(int(address))  # drops a scope id
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
    return address


def x_forwarded_for_hops(value: str) -> Iterator[Address | None]:
    """Each hop of an ``X-Forwarded-For`` value, right to left, read as asked for (empty
    entries skipped)."""
    end = len(value)
    while end >= 0:
        start = value.rfind(",", 0, end)
        part = value[start + 1 : end]
        end = start if start >= 0 else -1
        if part and not part.isspace():
            yield parse_node(part)


def forwarded_hops(value: str) -> Iterator[Address | None]:
    """The ``for=`` address of each element of a ``Forwarded`` value, right to left, read
    as asked for (empty elements skipped); ``None`` for an element without exactly one
    ``for``, or one that does not parse. A quote left open ends the reading with
    ``None``: it is read from the right, so it can only swallow text to its left, never
    an element a proxy appended after it."""
    for pairs in _elements_from_right(value):
        yield None if pairs is None else _for_of(pairs)


def x_forwarded_for(value: str) -> list[Address | None]:
    """Each hop of an ``X-Forwarded-For`` value, left to right (empty entries skipped)."""
    return list(x_forwarded_for_hops(value))[::-1]


def forwarded_for(value: str) -> list[Address | None]:
    """The ``for=`` address of each element of a ``Forwarded`` value, left to right (see
    :func:`forwarded_hops`)."""
    return list(forwarded_hops(value))[::-1]


def _elements_from_right(value: str) -> Iterator[list[str] | None]:
    """The elements of a ``Forwarded`` value from the right, each as its ``name=value``
    pairs (right to left); commas and semicolons inside quoted strings are part of the
    value. ``None`` for an element holding a quote that opens nowhere, the last one read.

    Each step jumps to the nearest separator or quote on the left (``str.rfind``), so an
    element costs about its length and nothing is read past the last element asked for.
    """
    pairs: list[str] = []
    end = cursor = len(value)  # ``end``: where the pair being read ends
    comma, semicolon, quote = (value.rfind(c, 0, cursor) for c in ',;"')
    while True:
        at = max(comma, semicolon, quote)
        if at < 0:
            pairs.append(value[:end])
            if _holds_text(pairs):
                yield pairs
            return
        if at == quote:
            opening = _opening_quote(value, at)
            if opening < 0:
                yield None
                return
            cursor = opening
            comma, semicolon, quote = (value.rfind(c, 0, cursor) for c in ',;"')
            continue
        pairs.append(value[at + 1 : end])
        end = cursor = at
        if at == comma:
            if _holds_text(pairs):
                yield pairs
            pairs = []
            comma = value.rfind(",", 0, cursor)
        else:
            semicolon = value.rfind(";", 0, cursor)


def _opening_quote(value: str, closing: int) -> int:
    """Where the quoted string that ``closing`` ends opens (a quote not escaped by an odd
    run of backslashes); -1 when none does."""
    at = closing
    while True:
        at = value.rfind('"', 0, at)
        if at < 0:
            return -1
        start = at
        while start > 0 and value[start - 1] == "\\":
            start -= 1
        if (at - start) % 2 == 0:
            return at


def _holds_text(pairs: list[str]) -> bool:
    return any(pair and not pair.isspace() for pair in pairs)


def _for_of(pairs: list[str]) -> Address | None:
    found = None
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if name.strip().lower() != "for":
            continue
        if found is not None or not sep:
            return None  # two for= in one element, or a bare "for"
        found = value.strip()
    if found is None:
        return None
    if found.startswith('"'):
        quoted = _QUOTED_STRING.fullmatch(found)
        if quoted is None:
            return None
        found = _QUOTED_PAIR.sub(r"\1", quoted.group(1))
    return parse_node(found)


def walk(hops: Iterable[Address | None], trusted: Callable[[Address], bool]) -> Address | None:
    """The client that ``hops`` (right to left, as :func:`x_forwarded_for_hops` and
    :func:`forwarded_hops` give them) name, read as far as each hop is ``trusted``: the
    first untrusted address; the leftmost when all are trusted.

    The caller has already found the sender (``REMOTE_ADDR``) trusted, so each hop read
    was written by a trusted proxy. ``None`` (the client is unknown) when a hop read is
    not an address, when there is none, or past :data:`MAX_HOPS` trusted ones: never a
    trusted proxy's own address because of what it could not read."""
    client = None
    for read, hop in enumerate(hops):
        if hop is None or read == MAX_HOPS:
            return None
        client = hop
        if not trusted(hop):
            return hop
    return client
