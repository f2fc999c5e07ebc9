"""Identities as a person types them: ``user:alice``, an address, ``header:X-Api-Key=...``,
``auth:<API client>``.

The admin and the ``ratelimits`` command turn what an operator types into the identity
the limiter counts (:func:`identity_from_text`), so keys can be found and reset by it.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from django.contrib.auth import get_user_model

from ratelimits.engine.keys import rotation as key_rotation
from ratelimits.engine.keys.identity import (
    GLOBAL,
    UNKNOWN_IP,
    header_identity,
    ip_identity,
    meta_key,
    principal_identity,
    user_identity,
    username_identity,
)

_HASHED = re.compile(r"(u#|h:|a:|n:)[0-9a-f]{32}")

IDENTITY_FORMS = (
    "user:<username>, u:<user pk>, ip:<address> (or a bare address), "
    "header:<Name>=<value>, auth:<API client>, username:<attempted username>, global, or a "
    "hashed identity as listed by `keys`"
)


def identity_from_text(text: str, ipv6_prefix: int | None = None) -> str:
    """The identity a person means by ``text`` (see :data:`IDENTITY_FORMS`).

    ``user:alice`` looks the user up; ``username:alice`` is the name a sign-in attempted,
    whether or not such a user exists; an address is grouped like the limiter groups it
    (IPv6 to its network of ``ipv6_prefix`` bits: the policy's; ``None``: the
    ``IPV6_PREFIX`` setting); a header value is hashed. Raises ``ValueError`` with a
    readable message for anything else.
    """
    text = text.strip()
    if text in (GLOBAL, UNKNOWN_IP) or _HASHED.fullmatch(text):
        return text
    if text.startswith("user:"):
        return user_identity(find_user(text.removeprefix("user:")).pk)
    if text.startswith("u:") and len(text) > 2:
        return user_identity(text.removeprefix("u:"))
    if text.startswith("auth:"):
        name = text.removeprefix("auth:").strip()
        if not name:
            raise ValueError(f"{text!r}: write an API client as auth:<what it authenticates as>.")
        return principal_identity(name)
    if text.startswith("username:"):
        attempted = username_identity(text.removeprefix("username:"))
        if attempted is None:
            raise ValueError(f"{text!r}: write an attempted username as username:<name>.")
        return attempted
    if text.startswith("header:"):
        name, sep, value = text.removeprefix("header:").partition("=")
        if not sep or not name or not value:
            raise ValueError(f"{text!r}: write a header as header:<Name>=<value>.")
        return header_identity(meta_key(name), value)
    address = text.removeprefix("ip:")
    try:
        network = ipaddress.ip_network(address, strict=False)
    except ValueError:
        raise ValueError(f"{text!r} is not an identity. Use {IDENTITY_FORMS}.") from None
    if "/" in address and network.num_addresses > 1 and network.version == 4:
        raise ValueError(f"{text!r}: IPv4 identities are single addresses.")
    return ip_identity(str(network.network_address), ipv6_prefix)


def find_user(username: str) -> Any:
    """The user called ``username``; ``ValueError`` when there is none."""
    model = get_user_model()
    try:
        return model._default_manager.get_by_natural_key(username)
    except model.DoesNotExist:
        raise ValueError(f"There is no user {username!r}.") from None


def previous_identities(text: str) -> tuple[str, ...]:
    """What the secret in ``text`` (``header:<Name>=<value>``, ``auth:<API client>``) was
    hashed to under each ``SECRET_KEY_FALLBACKS`` key: the identities an override stored
    before a key rotation holds, and the keys counted before it. Empty for any other form,
    or without fallback keys (see :mod:`ratelimits.engine.keys.rotation`)."""
    text = text.strip()
    if text.startswith("auth:"):
        name = text.removeprefix("auth:").strip()
        return key_rotation.principal_identities(name) if name else ()
    if text.startswith("header:"):
        name, sep, value = text.removeprefix("header:").partition("=")
        if sep and name and value:
            return key_rotation.header_identities(meta_key(name), value)
    return ()
