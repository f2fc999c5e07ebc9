"""Networks that no policy limits (``EXEMPT_NETWORKS``): health checks, internal monitors.

The client address is the one the limiter counts (``NUM_PROXIES`` applies), so a client
cannot claim an exempt address with a forged ``X-Forwarded-For``.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Any

from ratelimits import identity
from ratelimits.conf import app_settings

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.cache
def networks() -> tuple[_Network, ...]:
    """The parsed ``EXEMPT_NETWORKS``; entries that do not parse are left out (the system
    checks report them)."""
    found = []
    for entry in app_settings.EXEMPT_NETWORKS or ():
        try:
            found.append(ipaddress.ip_network(str(entry).strip(), strict=False))
        except ValueError:
            continue
    return tuple(found)


def is_exempt(request: Any) -> bool:
    """True when ``request`` comes from an exempt network."""
    exempt = networks()
    if not exempt:
        return False
    try:
        address = ipaddress.ip_address(identity.client_ip(request.META))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in exempt)
