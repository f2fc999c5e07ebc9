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
``username:<name>``, for a   ``n:<32 hex>``         sign-in attempts of that username
sign-in policy keyed                               (folded as the policy counts it:
``username`` (or a pair                            every spelling of it)
with it)
``auth:<principal>``, for   ``a:<32 hex>``         API clients authenticated as that
a policy keyed ``user`` or                         principal, not as a user (django-
``user_or_ip``                                     ninja's ``request.auth``: a key
                                                   string, or ``app_label.model:pk``
                                                   for a model instance)
==========================  =====================  ==================================

A secret is hashed the way the limiter hashes the header (HMAC keyed from
``SECRET_KEY``, with the header's name), or the principal (see
:func:`~ratelimits.engine.keys.identity.principal_text`), so the stored value cannot be read
back, and it only matches while the site keeps the same ``SECRET_KEY`` (and the policy
the same header).
Stored forms are accepted as typed (a policy file exported elsewhere holds them).
"""

from __future__ import annotations

import ipaddress
import re

from ratelimits import validators
from ratelimits.engine.keys import kinds
from ratelimits.engine.keys.identity import (
    header_identity,
    meta_key,
    principal_identity,
    username_identity,
)

#: The stored forms, for the database constraint (blank: the override names no identity).
STORED_PATTERN = r"^(|ip:[0-9a-fA-F:.]+(/[0-9]{1,3})?|[ahn]:[0-9a-f]{32})\Z"
_STORED = re.compile(STORED_PATTERN)
_HASHED = re.compile(r"h:[0-9a-f]{32}")
_PRINCIPAL = re.compile(r"a:[0-9a-f]{32}")
_USERNAME = re.compile(r"n:[0-9a-f]{32}")
#: How an operator names an API client that authenticated as something other than a user.
AUTH_PREFIX = "auth:"
#: How an operator names an attempted username (a sign-in policy's block-list).
USERNAME_PREFIX = "username:"


def is_stored_form(value: str) -> bool:
    return bool(_STORED.match(value))


def normalize(text: str, policy_key: str) -> str:
    """The stored form of what an operator typed for a policy keyed ``policy_key``.

    Raises ``ValueError`` with a readable message when ``text`` names nothing the policy
    can count."""
    text = (text or "").strip()
    if not text:
        return ""
    names = _names(policy_key)
    if text.startswith(AUTH_PREFIX) or _PRINCIPAL.fullmatch(text):
        return _principal(text, policy_key)
    if text.startswith(USERNAME_PREFIX) or _USERNAME.fullmatch(text):
        return _username(text, policy_key)
    if kinds.ADDRESSES not in names and kinds.API_KEYS not in names:
        if kinds.API_CLIENTS in names:
            raise ValueError(
                f"A policy keyed by {policy_key} never counts clients by address or API key: "
                f"name a user, a group or an API client ({AUTH_PREFIX}<what it "
                "authenticates as>)."
            )
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


def _names(policy_key: str) -> frozenset[str]:
    """What an override of a policy keyed ``policy_key`` may name (the key-kind registry's
    :attr:`~ratelimits.engine.keys.kinds.KeyKind.overrides`); an unknown key, anything."""
    if not kinds.is_key(policy_key):
        return frozenset((kinds.USERS, kinds.ADDRESSES, kinds.API_KEYS, kinds.API_CLIENTS))
    return kinds.kind_of(policy_key).overrides


def _principal(text: str, policy_key: str) -> str:
    if kinds.API_CLIENTS not in _names(policy_key):
        raise ValueError(
            f"An API client ({AUTH_PREFIX}...) is counted only by policies keyed by user or "
            f"user_or_ip, not {policy_key or 'this key'}."
        )
    if _PRINCIPAL.fullmatch(text):
        return text
    name = text.removeprefix(AUTH_PREFIX).strip()
    if not name:
        raise ValueError(f"Write an API client as {AUTH_PREFIX}<what it authenticates as>.")
    return principal_identity(name)


def _username(text: str, policy_key: str) -> str:
    if kinds.USERNAMES not in _names(policy_key):
        raise ValueError(
            f"A username ({USERNAME_PREFIX}...) is counted only by sign-in policies keyed by "
            f"username or a pair with it, not {policy_key or 'this key'}."
        )
    if _USERNAME.fullmatch(text):
        return text
    found = username_identity(text.removeprefix(USERNAME_PREFIX))
    if found is None:
        raise ValueError(f"Write a username as {USERNAME_PREFIX}<name>.")
    return found


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
    if stored.startswith("a:"):
        return f"API client (hashed {stored[2:10]}…)"
    if stored.startswith("n:"):
        return f"username (hashed {stored[2:10]}…)"
    return stored.removeprefix("ip:")
