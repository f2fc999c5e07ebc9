"""Forwarding headers as proxies write them: ``X-Forwarded-For`` and RFC 7239 ``Forwarded``.

Pure parsing, no settings: :mod:`ratelimits.http.proxies` decides whom to believe.

A hop's address (:func:`parse_node`) is read in every form proxies write: ``203.0.113.7``,
``203.0.113.7:4711`` (Azure Application Gateway), ``2001:db8::1``, ``[2001:db8::1]`` and
``[2001:db8::1]:4711`` (RFC 7239 quotes these: ``for="[2001:db8::1]:4711"``). An IPv4-mapped
IPv6 address is its IPv4 address, an IPv6 scope id (``%eth0``, free text) is dropped.
``unknown``, an obfuscated identifier (``_hidden``) and anything else is not an address:
``None``, which stops a walk (:func:`walk`).
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Sequence

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Longer than any address with brackets, a scope id and a port that a proxy writes.
_MAX_NODE = 100
#: A port after an address: digits, or an RFC 7239 obfuscated port (``_abc``).
_PORT = re.compile(r":(?:[0-9]{1,5}|_[A-Za-z0-9._-]+)")
_QUOTED_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"', re.DOTALL)
_QUOTED_PAIR = re.compile(r"\\(.)", re.DOTALL)
#: A Forwarded value's tokens: a quoted string (to its end when unclosed), a run of other
#: text, or a separator.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[^",;]+|[,;]', re.DOTALL)


@functools.lru_cache(maxsize=4096)
def parse_node(text: str) -> Address | None:
    """The address a hop names (see the module docstring); ``None`` when it names none.
    Cached: a site sees the same proxies and clients again and again."""
    text = text.strip()
    if not text or len(text) > _MAX_NODE:
        return None
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


def x_forwarded_for(value: str) -> list[Address | None]:
    """Each hop of an ``X-Forwarded-For`` value, left to right (empty entries skipped)."""
    return [parse_node(part) for part in value.split(",") if part.strip()]


def forwarded_for(value: str) -> list[Address | None]:
    """The ``for=`` address of each element of a ``Forwarded`` value, left to right
    (empty elements skipped); ``None`` for an element without exactly one ``for``, or one
    that does not parse (an unclosed quote makes everything after it one bad element)."""
    return [_for_of(pairs) for pairs in _elements(value)]


def _elements(value: str) -> list[list[str]]:
    """The elements of a ``Forwarded`` value, each as its ``name=value`` pairs; commas and
    semicolons inside quoted strings are part of the value."""
    elements: list[list[str]]
    if '"' not in value:
        elements = [part.split(";") for part in value.split(",")]
    else:
        elements, pairs, current = [], [], []
        for token in _TOKENS.findall(value):
            if token == ",":
                pairs.append("".join(current))
                elements.append(pairs)
                pairs, current = [], []
            elif token == ";":
                pairs.append("".join(current))
                current = []
            else:
                current.append(token)
        pairs.append("".join(current))
        elements.append(pairs)
    return [pairs for pairs in elements if any(pair.strip() for pair in pairs)]


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


def walk(hops: Sequence[Address | None], trusted: Callable[[Address], bool]) -> Address | None:
    """The client that ``hops`` (left to right) name, read from the right as far as each
    hop is ``trusted``: the first untrusted address; the leftmost when all are trusted.

    The caller has already found the sender (``REMOTE_ADDR``) trusted. A hop that is not
    an address stops the walk: the client is then the last address read (``None``: the
    sender itself, when the rightmost hop is the bad one or there is none)."""
    client = None
    for hop in reversed(hops):
        if hop is None:
            return client
        client = hop
        if not trusted(hop):
            return hop
    return client
