"""Networks that no policy limits (``EXEMPT_NETWORKS``): health checks, internal monitors.

The address checked is the one the limiter counts (``TRUSTED_PROXIES`` applies, in
:func:`ratelimits.http.request_facts.client_ip`), so a client cannot claim an exempt address with a
forged ``X-Forwarded-For`` or ``Forwarded``.
"""

from __future__ import annotations

import functools
import ipaddress

from ratelimits.conf import app_settings, resets_on_setting_change

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


def is_exempt_address(address: str) -> bool:
    """True when the client ``address`` is in an exempt network."""
    exempt = networks()
    if not exempt:
        return False
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return any(parsed in network for network in exempt)


resets_on_setting_change("RATELIMITS")(networks.cache_clear)
