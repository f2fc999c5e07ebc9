"""Who a request counts as under a django-ratelimit policy: the client address as
django-ratelimit reads it (``RATELIMIT_IP_META_KEY``, ``RATELIMIT_IPV4_MASK``), and the
identity of each key.

Without ``RATELIMIT_IP_META_KEY`` the address is ratelimits' own (``REMOTE_ADDR``, or the
client behind ``TRUSTED_PROXIES``); with it, the ``request.META`` entry it names, or what
the callable (or dotted path) it names returns, as django-ratelimit reads it. An IPv4
address counts per network of ``RATELIMIT_IPV4_MASK`` bits (32: per address); an IPv6
one per network of the policy's ``ipv6_prefix`` (written from ``RATELIMIT_IPV6_MASK``).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from ratelimits.contrib.django_ratelimit.keys import CODE_KEY, key_value
from ratelimits.engine.keys.identity import digest
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.http.proxies import client_ip
from ratelimits.http.request_facts import RequestFacts

logger = logging.getLogger("ratelimits")

#: What :func:`client_address` gives when the address cannot be read: ``ip:unknown``.
UNKNOWN = ""


def meta_address(request: Any) -> str:
    """django-ratelimit's ``_get_ip`` before its masks: the address ``RATELIMIT_IP_META_KEY``
    names (ratelimits' own when unset); ``ImproperlyConfigured`` when it gives none."""
    ip_meta = getattr(settings, "RATELIMIT_IP_META_KEY", None)
    if not ip_meta:
        address = client_ip(request.META)
        if not address:
            raise ImproperlyConfigured(
                "The client address is empty (REMOTE_ADDR): a reverse proxy connecting "
                "over a Unix socket? Set RATELIMITS['TRUSTED_PROXIES'], or "
                "RATELIMIT_IP_META_KEY; see docs/django-ratelimit.md."
            )
        return address
    if callable(ip_meta):
        return str(ip_meta(request))
    if isinstance(ip_meta, str) and "." in ip_meta:
        return str(import_string(ip_meta)(request))
    if ip_meta in request.META:
        return str(request.META[ip_meta])
    raise ImproperlyConfigured(f"RATELIMIT_IP_META_KEY: request.META has no {ip_meta!r}.")


def masked(address: str, ipv6_mask: int | None = None) -> str:
    """``address`` as the network it counts in (its first address): IPv4 per
    ``RATELIMIT_IPV4_MASK`` bits, IPv6 per ``ipv6_mask`` (``None``:
    ``RATELIMIT_IPV6_MASK``, else 64), as django-ratelimit masks it; text that is no
    address is returned as it is."""
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return address
    if ip.version == 4:
        mask = getattr(settings, "RATELIMIT_IPV4_MASK", 32)
    else:
        mask = ipv6_mask if ipv6_mask is not None else getattr(settings, "RATELIMIT_IPV6_MASK", 64)
    return str(ipaddress.ip_network(f"{ip}/{mask}", strict=False).network_address)


def client_address(request: Any) -> str:
    """:func:`meta_address` with the IPv4 mask, for a request being decided: an address
    that cannot be read is logged and counts as ``ip:unknown`` (one counter), never a
    500."""
    try:
        address = meta_address(request)
    except Exception:
        logger.exception("ratelimits: django-ratelimit's client address could not be read.")
        return UNKNOWN
    return masked(address, 128)  # the policy's ipv6_prefix groups IPv6 addresses


def code_identity(value: str) -> str:
    """The identity of a value a code key gave: a keyed hash (it may be a secret)."""
    return f"v:{digest('django_ratelimit' + chr(0) + value)}"


def identity_of(key: Any, code_key: bool, group: str) -> Callable[[Any, CompiledPolicy], str]:
    """Who a request counts as under a policy of a ``@ratelimit(key=key)``: the code's
    value while the policy's key is still the one written for it (``code_key``: a key
    computed in code), else the policy's key, with django-ratelimit's address."""
    written = CODE_KEY if code_key else str(key)

    def identity(request: Any, policy: CompiledPolicy) -> Any:
        if code_key and policy.key == written:
            return code_identity(key_value(key, group, request))
        return policy.kind.identity(RequestFacts(request, client_address(request)), policy)

    return identity
