"""Whom to believe about a request's client address: ``TRUSTED_PROXIES``, ``NUM_PROXIES``.

- ``TRUSTED_PROXIES`` set (networks): ``X-Forwarded-For`` and ``Forwarded`` are read only
  when ``REMOTE_ADDR`` is in a trusted network, walked from the right while each hop is
  trusted; the first untrusted address is the client (all trusted: the leftmost). A hop
  that is not an address, or a header with none, makes the client unknown (``""``: the
  ``ip:unknown`` counter, never exempt), never the proxy's own address.
  ``FORWARDED_HEADER`` names the one header the proxies write, and the other is never
  read; unset, both are, and a request whose two headers do not name the same client
  counts as unknown: one of them was not written by the proxies. ``NUM_PROXIES`` is
  then ignored.
- Else ``NUM_PROXIES`` = N > 0: the Nth ``X-Forwarded-For`` entry from the right, whoever
  sent it (the way it always worked: right only when nothing but the proxies can reach
  the site); ``Forwarded`` is not read.
- Else ``REMOTE_ADDR``. While no proxy is trusted, a process notes whether its first
  :data:`NOTICE_SAMPLE` requests come from private or loopback addresses carrying a
  forwarding header, and logs a warning when most do: the site is behind a proxy that
  nobody told it about, and every client shares the proxy's counter. It then goes on
  noting, and warns again each minute, as long as most do.

Both warnings are misconfigurations that last: each is said at most once a minute while
it does (:mod:`ratelimits.engine.reminders`), not once per process.

Every address read (``REMOTE_ADDR``, each hop) in a ``NAT64_PREFIXES`` prefix is the IPv4
address it embeds (:mod:`ratelimits.http.nat64`).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
from collections.abc import Callable, Iterator
from typing import Any

from ratelimits.conf import app_settings, resets_on_setting_change
from ratelimits.engine.reminders import Reminder
from ratelimits.http import nat64
from ratelimits.http.forwarded import (
    Address,
    forwarded_hops,
    parse_node,
    walk,
    x_forwarded_for_hops,
)

logger = logging.getLogger("ratelimits")

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: How many of a process's first requests the private-sender notice looks at.
NOTICE_SAMPLE = 200


def parse_network(entry: Any) -> _Network:
    """One ``TRUSTED_PROXIES`` entry ("10.0.0.0/8", "127.0.0.1", "2001:db8::/32") as a
    network; ``ValueError`` naming it when it is not one."""
    if not isinstance(entry, str):
        raise ValueError(f"{entry!r} is not a string such as '10.0.0.0/8'")
    try:
        network = ipaddress.ip_network(entry.strip(), strict=False)
    except ValueError:
        raise ValueError(f"{entry!r} is not an IP address or network") from None
    if isinstance(network, ipaddress.IPv6Network) and network.prefixlen >= 96:
        mapped = network.network_address.ipv4_mapped
        if mapped is not None:  # ::ffff:10.0.0.0/104: the IPv4 network, as addresses are read
            return ipaddress.IPv4Network((mapped, network.prefixlen - 96))
    return network


@functools.cache
def trusted_networks() -> tuple[_Network, ...]:
    """The parsed ``TRUSTED_PROXIES``; entries that do not parse are left out (the system
    checks report them as an error)."""
    found = []
    entries = app_settings.TRUSTED_PROXIES or ()
    for entry in entries if isinstance(entries, list | tuple) else ():
        try:
            found.append(parse_network(entry))
        except ValueError:
            continue
    return tuple(found)


@functools.lru_cache(maxsize=4096)
def is_trusted(address: Address) -> bool:
    """True when ``address`` is in a ``TRUSTED_PROXIES`` network (cached: the proxies'
    own addresses come back on every request)."""
    return any(address in network for network in trusted_networks())


def _address_of(text: str) -> Address | None:
    """The address ``text`` names, a NAT64 one as the IPv4 address it embeds."""
    address = parse_node(text)
    return None if address is None else nat64.unwrapped(address)


def _own(remote: str) -> str:
    """``REMOTE_ADDR`` as the client: as it is, or the IPv4 address a NAT64 one embeds."""
    if ":" not in remote or not nat64.prefixes():
        return remote
    address = parse_node(remote)
    if address is None:
        return remote
    embedded = nat64.unwrapped(address)
    return remote if embedded is address else str(embedded)


#: The values ``FORWARDED_HEADER`` takes besides ``None`` (in any case).
FORWARDED_HEADERS = ("X-Forwarded-For", "Forwarded")
#: Each forwarding header, by its name in lower case: its ``META`` key and how its hops
#: are read.
Hops = Callable[[str], Iterator[Address | None]]
_HEADERS: dict[str, tuple[str, Hops]] = {
    "x-forwarded-for": ("HTTP_X_FORWARDED_FOR", x_forwarded_for_hops),
    "forwarded": ("HTTP_FORWARDED", forwarded_hops),
}


@functools.cache
def forwarding_headers() -> tuple[tuple[str, Hops], ...]:
    """The headers read behind trusted proxies: the one ``FORWARDED_HEADER`` names, or
    both when it is unset (or not a header's name: the system checks report it)."""
    name = app_settings.FORWARDED_HEADER
    if isinstance(name, str) and name.strip().lower() in _HEADERS:
        return (_HEADERS[name.strip().lower()],)
    return tuple(_HEADERS.values())


def client_ip(meta: dict[str, Any]) -> str:
    """The client address of a request's ``META`` (see the module docstring); ``""`` when
    unknown."""
    remote = str(meta.get("REMOTE_ADDR") or "")
    if trusted_networks():
        return _behind_trusted_proxies(meta, remote)
    proxies = app_settings.NUM_PROXIES
    if proxies > 0:
        return _by_hop_count(meta.get("HTTP_X_FORWARDED_FOR"), remote, int(proxies))
    if _notice.open:
        _notice.note(meta, remote)
    return _own(remote)


def _behind_trusted_proxies(meta: dict[str, Any], remote: str) -> str:
    values = [(meta.get(key), hops) for key, hops in forwarding_headers()]
    present = [(str(value), hops) for value, hops in values if value]
    if not present:
        return _own(remote)
    sender = _address_of(remote)
    if sender is None or not is_trusted(sender):
        return _own(remote)
    found = [walk(map(nat64.unwrapped, hops(value)), is_trusted) for value, hops in present]
    if len(found) == 2 and found[0] != found[1]:
        _warn_of_disagreement()
        return ""
    client = found[0]
    return "" if client is None else str(client)


def _by_hop_count(xff: Any, remote: str, proxies: int) -> str:
    """``NUM_PROXIES``: the Nth ``X-Forwarded-For`` entry from the right, ``REMOTE_ADDR``
    when it is not an address."""
    if not xff:
        return _own(remote)
    entries = [part for part in str(xff).split(",") if part.strip()]
    if not entries:
        return _own(remote)
    address = _address_of(entries[-min(proxies, len(entries))])
    return _own(remote) if address is None else str(address)


#: The two warnings of this module, each said at most once a minute.
_reminders = Reminder()
_DISAGREEMENT = "disagreeing headers"
_UNTRUSTED_PROXY = "a proxy nobody trusts"


def _warn_of_disagreement() -> None:
    if _reminders.due(_DISAGREEMENT):
        logger.warning(
            "ratelimits: a request from a trusted proxy carried X-Forwarded-For and "
            "Forwarded that do not name the same client; it counts as ip:unknown (one "
            "counter for every such request). Set RATELIMITS['FORWARDED_HEADER'] to the "
            "header your proxies write, and have them remove the other (nginx: "
            'proxy_set_header Forwarded "";). Repeated every minute while such requests '
            "come."
        )


class _PrivateSenderNotice:
    """Counts, over samples of :data:`NOTICE_SAMPLE` requests while no proxy is trusted,
    those from a private or loopback ``REMOTE_ADDR`` that carry a forwarding header. A
    sample where they are most warns (at most once a minute) and another sample follows;
    the first where they are not closes the notice. Two integer increments a request
    while open, one attribute read after (races only blur the counts)."""

    def __init__(self) -> None:
        self.open = True
        self.seen = 0
        self.proxied = 0

    def note(self, meta: dict[str, Any], remote: str) -> None:
        self.seen += 1
        if meta.get("HTTP_X_FORWARDED_FOR") or meta.get("HTTP_FORWARDED"):
            address = parse_node(remote)
            if address is not None and (address.is_private or address.is_loopback):
                self.proxied += 1
        if self.seen < NOTICE_SAMPLE:
            return
        seen, proxied, self.seen, self.proxied = self.seen, self.proxied, 0, 0
        if 2 * proxied <= seen:
            self.open = False
        elif _reminders.due(_UNTRUSTED_PROXY):
            logger.warning(
                "ratelimits: %d of %d requests in a row to this process came from private "
                "or loopback addresses with X-Forwarded-For or Forwarded, and no proxy is "
                "trusted: every client behind that proxy shares one counter (and one "
                "exemption). Set RATELIMITS['TRUSTED_PROXIES'] to the proxies' networks "
                '(see docs/settings.md, "Client addresses behind proxies"). Repeated '
                "every minute while they come.",
                proxied,
                seen,
            )


_notice = _PrivateSenderNotice()


@resets_on_setting_change("RATELIMITS")
def _forget_settings() -> None:
    global _notice
    trusted_networks.cache_clear()
    is_trusted.cache_clear()
    forwarding_headers.cache_clear()
    _notice = _PrivateSenderNotice()
    _reminders.clear()
