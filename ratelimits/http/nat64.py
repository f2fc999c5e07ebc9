"""Client addresses a NAT64 or SIIT translator wrote: IPv4 clients inside an IPv6 prefix.

An IPv6-only site reached by IPv4 clients through a translator sees each of them as an
address of the translator's prefix (RFC 6052): ``64:ff9b::198.51.100.7`` under the
well-known ``64:ff9b::/96``. Grouped by ``IPV6_PREFIX`` they would all share one counter
(``ip:64:ff9b::/64``), so an address in one of ``RATELIMITS["NAT64_PREFIXES"]`` is read as
the IPv4 address it embeds, as an IPv4-mapped address (``::ffff:198.51.100.7``) is.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Any

from ratelimits.conf import app_settings, resets_on_setting_change
from ratelimits.http.forwarded import Address

#: The prefix lengths RFC 6052 lays an IPv4 address out in.
PREFIX_LENGTHS = (32, 40, 48, 56, 64, 96)
#: The well-known prefix (RFC 6052), in ``NAT64_PREFIXES`` by default.
WELL_KNOWN_PREFIX = "64:ff9b::/96"


def parse_prefix(entry: Any) -> ipaddress.IPv6Network:
    """One ``NAT64_PREFIXES`` entry ("64:ff9b::/96", "2001:db8:64::/48") as a network;
    ``ValueError`` naming it when it is not an IPv6 prefix of an RFC 6052 length."""
    if not isinstance(entry, str):
        raise ValueError(f"{entry!r} is not a string such as {WELL_KNOWN_PREFIX!r}")
    try:
        network = ipaddress.IPv6Network(entry.strip(), strict=False)
    except ValueError:
        raise ValueError(f"{entry!r} is not an IPv6 network") from None
    if network.prefixlen not in PREFIX_LENGTHS:
        lengths = ", ".join(f"/{n}" for n in PREFIX_LENGTHS)
        raise ValueError(f"{entry!r} is a /{network.prefixlen}; a NAT64 prefix is one of {lengths}")
    return network


@functools.cache
def prefixes() -> tuple[ipaddress.IPv6Network, ...]:
    """The parsed ``NAT64_PREFIXES``; entries that do not parse are left out (the system
    checks report them as an error)."""
    entries = app_settings.NAT64_PREFIXES or ()
    found = []
    for entry in entries if isinstance(entries, list | tuple) else ():
        try:
            found.append(parse_prefix(entry))
        except ValueError:
            continue
    return tuple(found)


def embedded_ipv4(address: ipaddress.IPv6Address, prefix_length: int) -> ipaddress.IPv4Address:
    """The IPv4 address embedded in ``address`` under a prefix of ``prefix_length`` bits
    (RFC 6052 section 2.2: the 32 bits after the prefix, skipping bits 64 to 71)."""
    bits = int(address)
    if prefix_length == 96:
        return ipaddress.IPv4Address(bits & 0xFFFFFFFF)
    without_u = (bits >> 64) << 56 | bits & ((1 << 56) - 1)  # 120 bits, bits 64-71 dropped
    return ipaddress.IPv4Address(without_u >> (120 - prefix_length - 32) & 0xFFFFFFFF)


def unwrapped(address: Address) -> Address:
    """``address``, or the IPv4 address it embeds when it is in a NAT64 prefix."""
    if isinstance(address, ipaddress.IPv6Address):
        for prefix in prefixes():
            if address in prefix:
                return embedded_ipv4(address, prefix.prefixlen)
    return address


@resets_on_setting_change("RATELIMITS")
def _forget_prefixes() -> None:
    prefixes.cache_clear()
