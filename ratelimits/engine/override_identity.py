"""The identity an override names, in the form stored and matched.

An override's ``identity`` is typed by an operator (admin, policy file) and stored in one
of two forms, which are also the forms the limiter compares with a request's identity:

==========================  =====================  ==================================
typed                       stored                 matches
==========================  =====================  ==================================
``203.0.113.7``             ``ip:203.0.113.7``     that address
``10.0.0.0/8``              ``ip:10.0.0.0/8``      every address in the network
``2001:db8::/48``           ``ip:2001:db8::/48``   every IPv6 client group inside it
an API key (any other       ``h:<32 hex>``         requests whose header (the policy's
text), for a policy keyed                          ``header:NAME``) carries that value
``header:NAME``
==========================  =====================  ==================================

A secret is hashed the way the limiter hashes the header (HMAC keyed from
``SECRET_KEY``, with the header's name), so the stored value cannot be read back, and it
only matches while the policy keeps the same header and the site the same ``SECRET_KEY``.
Stored forms are accepted as typed (a policy file exported elsewhere holds them).
"""

from __future__ import annotations

import ipaddress
import re

from ratelimits import validators
from ratelimits.engine.identity import header_identity, meta_key

#: The stored forms, for the database constraint (blank: the override names no identity).
STORED_PATTERN = r"^(|ip:[0-9a-fA-F:.]+(/[0-9]{1,3})?|h:[0-9a-f]{32})\Z"
_STORED = re.compile(STORED_PATTERN)
_HASHED = re.compile(r"h:[0-9a-f]{32}")


def is_stored_form(value: str) -> bool:
    return bool(_STORED.match(value))


def normalize(text: str, policy_key: str) -> str:
    """The stored form of what an operator typed for a policy keyed ``policy_key``.

    Raises ``ValueError`` with a readable message when ``text`` names nothing the policy
    can count."""
    text = (text or "").strip()
    if not text:
        return ""
    if policy_key in ("user", "global"):
        raise ValueError(
            f"A policy keyed by {policy_key} never counts clients by address or API key: "
            "name a user or a group instead."
        )
    if _HASHED.fullmatch(text):
        return text
    network = _network(text.removeprefix("ip:"))
    if network is not None:
        if network.num_addresses == 1 and network.version == 4:
            return f"ip:{network.network_address}"
        return f"ip:{network}"
    if text.startswith("ip:"):  # not an API key that happens to start so: a typo
        raise ValueError(f"{text!r} is not an IP address or network.")
    header = validators.header_name(policy_key)
    if header:
        return header_identity(meta_key(header), text)
    raise ValueError(
        "Not an IP address or network (203.0.113.7, 10.0.0.0/8). API keys apply to "
        "policies keyed by header:NAME."
    )


def network_of(stored: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The network of a stored ``ip:`` identity (a request's, or an override's)."""
    return _network(stored[3:]) if stored.startswith("ip:") else None


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def describe(stored: str) -> str:
    """How to show a stored identity: addresses as they are, secrets as "API key (hashed)"."""
    if stored.startswith("h:"):
        return f"API key (hashed {stored[2:10]}…)"
    return stored.removeprefix("ip:")
