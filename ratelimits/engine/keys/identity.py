"""Who a request counts against: the identity part of a Redis key.

An identity is a short string that becomes the Redis Cluster hash tag of the key, so
it never contains ``{`` or ``}`` and its length is bounded whatever the input:

=============  ============================  ===========================================
key            identity                      notes
=============  ============================  ===========================================
user           ``u:42``                      the user's pk; pks that are not short
                                             ``[A-Za-z0-9_-]`` (e-mails...) are hashed:
                                             ``u#<32 hex>``
ip             ``ip:203.0.113.7``            behind ``TRUSTED_PROXIES`` (or
               ``ip:2001:db8:1:2::/64``      ``NUM_PROXIES``); IPv6 grouped by the
                                             policy's ``ipv6_prefix``, else ``IPV6_PREFIX``
header:<Name>  ``h:<32 hex>``                always hashed (keys, tokens are secrets);
                                             falls back to the IP without the header
user           ``a:<32 hex>``                an API client authenticated as something
                                             other than a user (django-ninja's
                                             ``request.auth``: an API key object or
                                             string), always hashed (:func:`principal`)
anon           ``ip:203.0.113.7``            as ``ip``, for a request without a user; a
                                             request with one is not counted (``None``)
global         ``global``                    one counter for everyone
username       ``n:<32 hex>``                the username a sign-in attempts, folded as
                                             wide as case- and accent-insensitive
                                             lookups (:mod:`~.usernames`), always hashed
                                             (:func:`username_identity`)
session        ``s:<32 hex>``                the browser session, always hashed; the IP
                                             without a session
a+b            ``n:<32 hex>+ip:203.0.113.7``  a pair of kinds: both identities, joined
=============  ============================  ===========================================

The kinds themselves, and which forms each makes, are the registry of
:mod:`ratelimits.engine.keys.kinds`.

Hashes are HMAC-SHA256 keyed from ``SECRET_KEY``, truncated to 128 bits. An override
stored as such a hash under a key now in ``SECRET_KEY_FALLBACKS`` still matches
(:mod:`ratelimits.engine.keys.rotation`); counters start afresh under the new key.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import re
from typing import Any

from django.conf import settings

from ratelimits.conf import app_settings, resets_on_setting_change
from ratelimits.engine.keys.usernames import fold

GLOBAL = "global"
_READABLE_PK = re.compile(r"[A-Za-z0-9_-]{1,40}")
UNKNOWN_IP = "ip:unknown"
# An IPv4 address exactly as ipaddress prints it (no leading zeros, each octet <= 255).
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_QUAD = re.compile(rf"{_OCTET}(\.{_OCTET}){{3}}")


@functools.cache
def _hash_key() -> bytes:
    return hash_key_of(settings.SECRET_KEY)


def hash_key_of(secret: object) -> bytes:
    """The HMAC key identities are hashed with under ``secret`` (``SECRET_KEY``, or one of
    ``SECRET_KEY_FALLBACKS``: :mod:`ratelimits.engine.keys.rotation`)."""
    return hashlib.sha256(b"ratelimits.identity:" + str(secret).encode()).digest()


resets_on_setting_change("SECRET_KEY")(_hash_key.cache_clear)


def digest(value: str | bytes, key: bytes | None = None) -> str:
    """A 32-hex-digit keyed hash of ``value``; the value cannot be read back from it.
    ``key``: another HMAC key (:func:`hash_key_of` a fallback secret); the current one by
    default."""
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogatepass")
    return hmac.new(key or _hash_key(), value, hashlib.sha256).hexdigest()[:32]


def user_identity(pk: Any) -> str:
    text = str(pk)
    if _READABLE_PK.fullmatch(text):
        return f"u:{text}"
    return f"u#{digest(text)}"


def ip_identity(address: str, prefix: int | None = None) -> str:
    """``ip:<address>``; IPv6 grouped to its network of ``prefix`` bits (``None``: the
    ``IPV6_PREFIX`` setting; a policy's ``ipv6_prefix``); anything unparsable is
    ``ip:unknown``."""
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
        if prefix is None:
            prefix = int(app_settings.IPV6_PREFIX)
        if prefix < 128:
            return f"ip:{ipaddress.IPv6Network((ip, prefix), strict=False)}"
    return f"ip:{ip}"


def principal_text(auth: Any) -> str | None:
    """The stable text naming an authenticated principal that is not a user: a string
    as it is, a model instance as ``<app_label>.<model_name>:<pk>``, an int in decimal,
    another object by its class and its ``pk`` or its own ``__str__``. ``None`` when
    ``auth`` is empty or has no stable name (a plain ``object()``: its text holds its
    memory address)."""
    if auth is None or isinstance(auth, bool):
        return None
    if isinstance(auth, str | bytes):
        text = auth if isinstance(auth, str) else auth.decode("latin-1")
        return text or None
    if isinstance(auth, int):
        return str(auth)
    meta = getattr(auth, "_meta", None)
    pk = getattr(auth, "pk", None)
    if meta is not None and pk is not None:
        return f"{meta.label_lower}:{pk}"
    kind = type(auth)
    if pk is not None:
        return f"{kind.__module__}.{kind.__qualname__}:{pk}"
    if kind.__str__ is not object.__str__:
        return f"{kind.__module__}.{kind.__qualname__}:{auth}"
    return None


def principal_identity(text: str, key: bytes | None = None) -> str:
    """``a:<32 hex>``: the identity of the principal :func:`principal_text` named (under
    the HMAC ``key``, as :func:`digest` takes it)."""
    return f"a:{digest('auth' + chr(0) + text, key)}"


def principal(auth: Any) -> str | None:
    """The identity of a non-user principal (see :func:`principal_text`), or ``None``."""
    text = principal_text(auth)
    return None if text is None else principal_identity(text)


def header_identity(name: str, value: str | bytes, key: bytes | None = None) -> str:
    text = value if isinstance(value, str) else value.decode("latin-1")
    return f"h:{digest(name.lower() + chr(0) + text, key)}"


def username_identity(username: object) -> str | None:
    """``n:<32 hex>``: the identity of the username a sign-in attempts, stripped and
    folded (:func:`~.usernames.fold`: ``Alice``, ``alice `` and ``alice`` with a dotless
    i share a counter, as a case-insensitive lookup finds one account under each), never
    stored readable; ``None`` for a blank one."""
    text = username if isinstance(username, str) else "" if username is None else str(username)
    text = fold(text)
    return f"n:{digest('username' + chr(0) + text)}" if text else None


def meta_key(header: str) -> str:
    """Where Django keeps a request header in ``request.META`` (``X-Api-Key`` ->
    ``HTTP_X_API_KEY``)."""
    name = header.upper().replace("-", "_")
    return name if name in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{name}"
