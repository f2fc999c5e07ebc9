"""Who a log line counts as under a policy, as a live request would: the policy's key
kind (:mod:`ratelimits.engine.keys.kinds`) reads :class:`LogFacts`: the address (a
logged X-Forwarded-For believed through ``TRUSTED_PROXIES``), the user from the log's
user field, a logged header; IPv6 grouped by the policy's ``ipv6_prefix``.

:func:`identity_of` gives ``(identity, client)``: the identity keys the counter, the
client is what the report shows, as the log shows it (an address, a user name, a
header's value: it is the operator's own log, nothing is hashed for the report).
"""

from __future__ import annotations

import functools

from ratelimits.engine.keys.exemptions import is_exempt_address
from ratelimits.engine.keys.kinds import PAIR, describe, pair_parts
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


class Unshown(Exception):
    """The log does not show what a policy counts by (a header not logged, a session, a
    sign-in's username)."""


class _LoggedUser:
    """The user a log line names, as the key kinds read a user (its name for a pk)."""

    __slots__ = ("pk",)

    def __init__(self, name: str) -> None:
        self.pk = name


class LogFacts:
    """What the key kinds read of a request (:class:`~ratelimits.engine.keys.kinds.Facts`),
    from one log line: what the log cannot show raises :class:`Unshown`."""

    __slots__ = ("_header_value", "line")

    auth = None

    def __init__(self, line: LogLine) -> None:
        self.line = line
        self._header_value: str | None = None

    @property
    def address(self) -> str:
        return client_address(self.line.address, self.line.forwarded_for)

    @property
    def user(self) -> _LoggedUser | None:
        return None if self.line.user is None else _LoggedUser(self.line.user)

    @property
    def username(self) -> str | None:
        raise Unshown

    @property
    def session_key(self) -> str | None:
        raise Unshown

    def header(self, meta_key: str) -> str | None:
        fields = self.line.fields
        name = meta_key.lower()
        if fields is None or name not in fields:
            raise Unshown
        value = fields[name]
        if value in (None, "", "-"):
            return None
        self._header_value = str(value)
        return self._header_value


def identity_of(policy: CompiledPolicy, line: LogLine) -> tuple[str, str] | None:
    """``(identity, client)`` of ``line`` under ``policy``, by its key kind as a live
    request's; ``None`` when the policy does not count it (a ``user`` policy and a line
    without a user); :data:`UNSHOWN` when the log does not show what the policy counts
    by."""
    facts = LogFacts(line)
    try:
        identity = policy.kind.identity(facts, policy)
    except Unshown:
        return UNSHOWN
    if identity is None:
        return None
    return identity, PAIR.join(_shown(part, facts) for part in pair_parts(identity))


def _shown(part: str, facts: LogFacts) -> str:
    """How the report shows one identity: as the log shows the client."""
    kind = describe(part)
    if kind == "user" and facts.line.user is not None:
        return facts.line.user
    if kind == "header" and facts._header_value is not None:
        return facts._header_value
    return part[3:] if kind == "ip" else part
