"""Who a log line counts as under a policy, as a live request would: the address (a logged
X-Forwarded-For believed through ``TRUSTED_PROXIES``), the user from the log's user
field, a logged header; IPv6 grouped by the policy's ``ipv6_prefix``.

:func:`identity_of` gives ``(identity, client)``: the identity keys the counter, the
client is what the report shows, as the log shows it (an address, a user name, a
header's value: it is the operator's own log, nothing is hashed for the report).
"""

from __future__ import annotations

import functools

from ratelimits.engine.keys.exemptions import is_exempt_address
from ratelimits.engine.keys.identity import (
    ANON,
    GLOBAL,
    digest,
    header_identity,
    ip_identity,
)
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.http.proxies import client_ip
from ratelimits.tools.simulate.formats import LogLine

#: What :func:`identity_of` answers when the log does not show what the policy counts by.
UNSHOWN = ("", "")


@functools.lru_cache(maxsize=65536)
def client_address(address: str, forwarded_for: str | None) -> str:
    """The client's address as a live request's would be read: ``address`` is the sender
    the web server saw, ``forwarded_for`` the X-Forwarded-For it logged."""
    meta = {"REMOTE_ADDR": address}
    if forwarded_for:
        meta["HTTP_X_FORWARDED_FOR"] = forwarded_for
    return client_ip(meta)


def is_exempt(line: LogLine) -> bool:
    """True when the line's client is in ``EXEMPT_NETWORKS``: no policy counts it."""
    return is_exempt_address(client_address(line.address, line.forwarded_for))


def header_field(policy: CompiledPolicy) -> str | None:
    """The JSON or CSV field a ``header:<Name>`` policy's header is logged under, as nginx
    names it (``X-Api-Key``: ``http_x_api_key``)."""
    meta = policy.header_meta_key
    return None if meta is None else meta.lower()


def _user(name: str) -> tuple[str, str]:
    # Only the counter's name: any stable identity without braces does (it is hashed
    # when it is not a short plain word, as a live pk would be).
    plain = name.isascii() and name.replace("_", "").replace("-", "").isalnum()
    return (f"u:{name}" if plain and len(name) <= 40 else f"u#{digest(name)}"), name


def identity_of(policy: CompiledPolicy, line: LogLine) -> tuple[str, str] | None:
    """``(identity, client)`` of ``line`` under ``policy``; ``None`` when the policy does
    not count it (a ``user`` policy and a line without a user); :data:`UNSHOWN` when the
    log does not show what the policy counts by."""
    kind = policy.key_kind
    if kind == GLOBAL:
        return GLOBAL, GLOBAL
    if kind in ("user", "user_or_ip") and line.user is not None:
        return _user(line.user)
    if kind == "user" or (kind == ANON and line.user is not None):
        return None
    if kind == "header":
        name = header_field(policy)
        if line.fields is None or name is None or name not in line.fields:
            return UNSHOWN
        value = line.fields[name]
        if value not in (None, "", "-"):
            text = str(value)
            return header_identity(policy.header_meta_key or "", text), text
    if kind == "username":
        return UNSHOWN
    address = client_address(line.address, line.forwarded_for)
    identity = ip_identity(address, policy.ipv6_prefix)
    return identity, identity[3:]
