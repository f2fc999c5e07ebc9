"""Who a request counts against: the identity part of a Redis key.

An identity is a short string that becomes the Redis Cluster hash tag of the key, so
it never contains ``{`` or ``}`` and its length is bounded whatever the input:

=============  ============================  ===========================================
key            identity                      notes
=============  ============================  ===========================================
user           ``u:42``                      the user's pk; pks that are not short
                                             ``[A-Za-z0-9_-]`` (e-mails...) are hashed:
                                             ``u#<32 hex>``
ip             ``ip:203.0.113.7``            behind ``NUM_PROXIES`` trusted proxies;
               ``ip:2001:db8:1:2::/64``      IPv6 grouped by ``IPV6_PREFIX``
header:<Name>  ``h:<32 hex>``                always hashed (keys, tokens are secrets);
                                             falls back to the IP without the header
global         ``global``                    one counter for everyone
=============  ============================  ===========================================

Hashes are HMAC-SHA256 keyed from ``SECRET_KEY``, truncated to 128 bits.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import re
from typing import Any

from django.conf import settings

from ratelimits.conf import app_settings

GLOBAL = "global"
_READABLE_PK = re.compile(r"[A-Za-z0-9_-]{1,40}")
_HASHED = re.compile(r"(u#|h:)[0-9a-f]{32}")
UNKNOWN_IP = "ip:unknown"
# An IPv4 address exactly as ipaddress prints it (no leading zeros, each octet <= 255).
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_QUAD = re.compile(rf"{_OCTET}(\.{_OCTET}){{3}}")


@functools.cache
def _hash_key() -> bytes:
    return hashlib.sha256(b"ratelimits.identity:" + str(settings.SECRET_KEY).encode()).digest()


def reset_hash_key() -> None:
    _hash_key.cache_clear()


def digest(value: str | bytes) -> str:
    """A 32-hex-digit keyed hash of ``value``; the value cannot be read back from it."""
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogatepass")
    return hmac.new(_hash_key(), value, hashlib.sha256).hexdigest()[:32]


def user_identity(pk: Any) -> str:
    text = str(pk)
    if _READABLE_PK.fullmatch(text):
        return f"u:{text}"
    return f"u#{digest(text)}"


def ip_identity(address: str) -> str:
    """``ip:<address>``; IPv6 grouped to its network; anything unparsable is ``ip:unknown``."""
    if _DOTTED_QUAD.fullmatch(address):  # the usual case, without building an object
        return f"ip:{address}"
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return UNKNOWN_IP
    if isinstance(ip, ipaddress.IPv6Address):
        ip = ipaddress.IPv6Address(int(ip))  # drops a scope id ("%eth0"), which is free text
        if ip.ipv4_mapped is not None:
            return f"ip:{ip.ipv4_mapped}"
        prefix = int(app_settings.IPV6_PREFIX)
        if prefix < 128:
            return f"ip:{ipaddress.IPv6Network((ip, prefix), strict=False)}"
    return f"ip:{ip}"


def header_identity(name: str, value: str | bytes) -> str:
    text = value if isinstance(value, str) else value.decode("latin-1")
    return f"h:{digest(name.lower() + chr(0) + text)}"


def meta_key(header: str) -> str:
    """Where Django keeps a request header in ``request.META`` (``X-Api-Key`` ->
    ``HTTP_X_API_KEY``)."""
    name = header.upper().replace("-", "_")
    return name if name in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{name}"


def client_ip(meta: dict[str, Any]) -> str:
    """The client address, trusting ``X-Forwarded-For`` only as far as ``NUM_PROXIES``.

    With N trusted proxies each appending to the header, the client is the Nth address
    from the right; whatever a client writes further left is ignored. With 0 proxies the
    header is ignored and ``REMOTE_ADDR`` is the client.
    """
    remote = str(meta.get("REMOTE_ADDR") or "")
    proxies = int(app_settings.NUM_PROXIES)
    forwarded = meta.get("HTTP_X_FORWARDED_FOR")
    if proxies <= 0 or not forwarded:
        return remote
    addresses = [part.strip() for part in str(forwarded).split(",") if part.strip()]
    if not addresses:
        return remote
    candidate = addresses[-min(proxies, len(addresses))]
    try:
        ipaddress.ip_address(candidate)
    except ValueError:
        return remote
    return candidate


def request_identity(kind: str, request: Any, header_meta_key: str | None = None) -> str | None:
    """The identity of ``request`` for a policy key kind, or ``None`` when it does not apply.

    ``kind`` is one of ``user``, ``ip``, ``user_or_ip``, ``header``, ``global``. A ``user``
    policy does not count anonymous requests (use ``user_or_ip`` for those).
    """
    if kind == GLOBAL:
        return GLOBAL
    if kind in ("user", "user_or_ip"):
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return user_identity(user.pk)
        if kind == "user":
            return None
    meta = request.META
    if kind == "header" and header_meta_key:
        value = meta.get(header_meta_key)
        if value:
            return header_identity(header_meta_key, value)
    return ip_identity(client_ip(meta))


def is_hashed(identity: str) -> bool:
    """True for identities that are keyed hashes (header values, unusual user pks)."""
    return identity.startswith(("u#", "h:"))


def describe(identity: str) -> str:
    """What kind of client ``identity`` is: ``user``, ``ip``, ``header`` or ``global``."""
    if identity == GLOBAL:
        return "global"
    if identity.startswith(("u:", "u#")):
        return "user"
    if identity.startswith("h:"):
        return "header"
    if identity.startswith("ip:"):
        return "ip"
    return "unknown"


IDENTITY_FORMS = (
    "user:<username>, u:<user pk>, ip:<address> (or a bare address), "
    "header:<Name>=<value>, global, or a hashed identity as listed by `keys`"
)


def identity_from_text(text: str) -> str:
    """The identity a person means by ``text`` (see :data:`IDENTITY_FORMS`).

    ``user:alice`` looks the user up; an address is grouped like the limiter groups it
    (IPv6 to its ``IPV6_PREFIX`` network); a header value is hashed. Raises ``ValueError``
    with a readable message for anything else.
    """
    text = text.strip()
    if text in (GLOBAL, UNKNOWN_IP) or _HASHED.fullmatch(text):
        return text
    if text.startswith("user:"):
        return user_identity(find_user(text.removeprefix("user:")).pk)
    if text.startswith("u:") and len(text) > 2:
        return user_identity(text.removeprefix("u:"))
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
    return ip_identity(str(network.network_address))


def find_user(username: str) -> Any:
    """The user called ``username``; ``ValueError`` when there is none."""
    from django.contrib.auth import get_user_model

    model = get_user_model()
    try:
        return model._default_manager.get_by_natural_key(username)
    except model.DoesNotExist:
        raise ValueError(f"There is no user {username!r}.") from None
