"""What the engine needs to know of a Django request: the one place every face reads it.

The client address behind trusted proxies, the user, a header's value, the view's URL
name, and from them the checks (policy, identity, shard) the engine decides. The DRF
throttle and the ``ratelimits check`` command use it; so will every other face.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ratelimits.conf import app_settings
from ratelimits.engine.keys import kinds
from ratelimits.engine.keys import rotation as key_rotation
from ratelimits.engine.keys.exemptions import is_exempt_address
from ratelimits.engine.policy.compiled import Check, CompiledPolicy
from ratelimits.engine.reminders import Reminder
from ratelimits.http.proxies import client_ip  # every face reads the address here

logger = logging.getLogger("ratelimits")

#: Who a request counts as under a policy (``None`` leaves the policy out).
IdentityOf = Callable[[Any, CompiledPolicy], "str | None"]


class RequestFacts:
    """What the key kinds read of one request (:class:`ratelimits.engine.keys.kinds.Facts`),
    each read once: the address behind the trusted proxies, the user, ``request.auth``, a
    header, the session key, and the username a sign-in attempts."""

    __slots__ = ("_address", "_user", "request", "username")

    def __init__(
        self, request: Any, address: str | None = None, username: str | None = None
    ) -> None:
        self.request = request
        self.username = username
        self._address = address
        self._user = _UNREAD

    @property
    def address(self) -> str:
        if self._address is None:
            self._address = client_ip(getattr(self.request, "_request", self.request).META)
        return self._address

    @property
    def user(self) -> Any:
        if self._user is _UNREAD:
            self._user = authenticated_user(self.request)
        return self._user

    @property
    def auth(self) -> Any:
        return getattr(self.request, "auth", None)

    @property
    def session_key(self) -> str | None:
        session = getattr(getattr(self.request, "_request", self.request), "session", None)
        return None if session is None else session.session_key

    def header(self, meta_key: str) -> str | None:
        return getattr(self.request, "_request", self.request).META.get(meta_key)


_UNREAD = object()


@dataclass(frozen=True, slots=True)
class _Keyed:
    """A key's settings without a compiled policy (what the key kinds read of one)."""

    header_meta_key: str | None = None
    ipv6_prefix: int | None = None


def request_identity(
    key: str,
    request: Any,
    header_meta_key: str | None = None,
    address: str | None = None,
    ipv6_prefix: int | None = None,
) -> str | None:
    """The identity of ``request`` for a policy ``key`` (a kind of
    :data:`~ratelimits.engine.keys.kinds.KEY_KINDS`, or a pair), or ``None`` when it does
    not count the request; for callers without a compiled policy (a policy's own is
    :func:`policy_identity`). ``header_meta_key`` is a header key's ``request.META`` name,
    ``address`` the request's :func:`client_ip` when the caller has it already,
    ``ipv6_prefix`` how an IPv6 client is grouped (``None``: the ``IPV6_PREFIX``
    setting)."""
    kind = kinds.kind_of(key)
    return kind.identity(RequestFacts(request, address), _Keyed(header_meta_key, ipv6_prefix))


def previous_identities(request: Any, policy: CompiledPolicy) -> tuple[str, ...]:
    """``request``'s identity under each ``SECRET_KEY_FALLBACKS`` key, when it is a hash of a
    secret (a header's value, an API client's principal); empty otherwise, or with no
    fallback keys. An override stored before a key rotation matches one of them
    (:mod:`ratelimits.engine.keys.rotation`); asked only on a miss among hashed overrides."""
    if not key_rotation.fallback_keys():
        return ()
    return policy.kind.previous(RequestFacts(request), policy)


def authenticated_user(request: Any) -> Any:
    """The user ``request`` is authenticated as: ``request.user`` (Django's, or DRF's after
    its authentication), else ``request.auth`` when that is a user (django-ninja's
    authentication leaves ``request.user`` anonymous and puts its principal there);
    ``None`` for an anonymous request or one authenticated as another principal."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return user
    auth = getattr(request, "auth", None)
    if auth is not None and getattr(auth, "is_authenticated", False) is True:
        return auth
    return None


def user_key(request: Any) -> str | None:
    """The key of ``request``'s user in an override table (``str(pk)``; ``None`` when
    anonymous)."""
    user = authenticated_user(request)
    return None if user is None else str(user.pk)


def is_exempt(request: Any) -> bool:
    """True when ``request`` comes from an ``EXEMPT_NETWORKS`` address."""
    return is_exempt_address(client_ip(request.META))


def url_name(request: Any) -> str | None:
    """The resolved URL name (``namespace:name``), ``None`` before URL resolution."""
    match = getattr(request, "resolver_match", None)
    return match.view_name if match is not None else None


def policy_identity(request: Any, policy: CompiledPolicy) -> str | None:
    """Who ``request`` counts as under ``policy``: its key kind's identity."""
    return policy.kind.identity(RequestFacts(request), policy)


#: Views whose cost above ``MAX_COST`` was logged (again each minute; the names come from
#: the URLconf, and a reminder remembers a bounded number of them).
_max_cost = Reminder()


def request_cost(cost: Any, request: Any) -> int | None:
    """The units ``request`` spends by its view's ``ratelimit_cost``: an int, or a callable
    ``(request) -> int``; ``None`` (the policies' own costs) when the view sets none.

    A cost that is not a whole number of at least 1 (or a callable that raises) is logged
    and the policies' own costs apply: a view's bug never turns into a 500. A cost above
    ``RATELIMITS["MAX_COST"]`` is refused the same way, logged at most once a minute per
    view (the client may choose it: a flood of them must not flood the log)."""
    if cost is None:
        return None
    try:
        value = cost(request) if callable(cost) else cost
    except Exception:
        logger.exception("ratelimits: the view's ratelimit_cost failed; its policies' costs apply.")
        return None
    if type(value) is int and value >= 1:
        if value <= app_settings.MAX_COST:
            return value
        view = _view_name(cost, request)
        if _max_cost.due(view):
            logger.warning(
                "ratelimits: view %s asked for a cost of %d, above RATELIMITS['MAX_COST'] "
                "(%d); refused, its policies' own costs apply (repeated every minute per "
                "view while such costs come).",
                view,
                value,
                app_settings.MAX_COST,
            )
        return None
    logger.error(
        "ratelimits: ratelimit_cost gave %r, not a whole number of at least 1; the "
        "policies' own costs apply.",
        value,
    )
    return None


def _view_name(cost: Any, request: Any) -> str:
    """The view a cost came from, for the log: its URL name or dotted path, else the cost
    callable's name (never the request's path, which the client chooses)."""
    match = getattr(getattr(request, "_request", request), "resolver_match", None)
    if match is not None:
        return match.view_name or match._func_path
    return getattr(cost, "__qualname__", None) or "a view"


def checks_for(
    request: Any,
    policies: Iterable[CompiledPolicy],
    identity_of: IdentityOf | None = None,
    cost: int | None = None,
    facts: RequestFacts | None = None,
) -> list[Check]:
    """The checks to decide for ``request``: one per policy that counts it, with the
    client's override applied and its shard picked, spending ``cost`` units (``None``:
    each policy's own cost). Who the request counts as is each policy's key kind's
    identity (of ``facts``, when the caller has them: a sign-in's attempted username),
    or ``identity_of``'s when a face overrides it. Empty for an exempt network; a
    policy an override exempts the client from, or whose identity is ``None``, is left
    out."""
    policies = list(policies)
    if not policies:
        return []
    # Read once, for the exemption and each ip identity (grouped by each policy's IPv6
    # prefix); from the Django request under a DRF one, without DRF's attribute proxying.
    known = facts if facts is not None else RequestFacts(request)
    if is_exempt_address(known.address):
        return []
    overridden = any(policy.overrides is not None for policy in policies)
    user = user_key(request) if overridden else None
    checks = []
    for policy in policies:
        if identity_of is None:
            who = policy.kind.identity(known, policy)
        else:
            who = identity_of(request, policy)
        if who is None:
            continue
        applied = (
            policy.for_client(user, who, functools.partial(previous_identities, request, policy))
            if overridden
            else policy
        )
        if applied is not None:  # None: an override exempts this client
            checks.append(Check(applied, who, applied.pick_shard(), cost))
    return checks
