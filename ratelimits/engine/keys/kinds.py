"""Who is counted: the registry of key kinds, as :mod:`ratelimits.engine.algorithms` is
the registry of algorithms.

A policy's ``key`` names one kind (``ip``, ``user``, ``header:X-Api-Key``...) or a pair
of them (``username+ip``: one counter per username *and* address). Each
:class:`KeyKind` says how a request's identity is made (:attr:`KeyKind.identity`, the
one dispatch every face and the sign-in backend go through), what it needs loaded
first, whether its identity is hashed, whether a sign-in policy may use it and what an
override of it may name. The model's validation and database constraint
(:data:`KEY_PATTERN`), the admin's filter, the rules and the docs read this registry;
``tests/engine/keys/test_kinds.py`` ties them together.

To add a kind: one :class:`KeyKind` in :data:`KEY_KINDS` (with its identity function
here), a migration for the constraint (``makemigrations ratelimits``), its test and its
row in ``docs/policies.md`` (see ``CONTRIBUTING.md``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from django.core.exceptions import ValidationError

from ratelimits.engine.keys import rotation
from ratelimits.engine.keys.identity import (
    GLOBAL,
    digest,
    header_identity,
    ip_identity,
    principal,
    principal_text,
    user_identity,
    username_identity,
)
from ratelimits.validators import HEADER_NAME_PATTERN, HEADER_PREFIX, header_name_problem

if TYPE_CHECKING:
    from ratelimits.engine.policy.compiled import CompiledPolicy


class Facts(Protocol):
    """What a key kind reads of a request (``ratelimits.http.request_facts.RequestFacts`` builds
    it from a Django request; the sign-in backend adds the attempted username)."""

    #: The client's address behind the trusted proxies.
    address: str
    #: The attempted username of a sign-in; ``None`` outside one.
    username: str | None

    @property
    def user(self) -> Any:
        """The authenticated user, or ``None``."""

    @property
    def auth(self) -> Any:
        """What the request authenticated as besides a user (``request.auth``), or ``None``."""

    @property
    def session_key(self) -> str | None:
        """The request's session key, ``None`` without a session."""

    def header(self, meta_key: str) -> str | None:
        """A request header's value by its ``request.META`` name, ``None`` when absent."""


#: Who a request counts as under a policy (``None``: the policy leaves it out).
IdentityFunction = Callable[[Facts, "CompiledPolicy"], "str | None"]
#: The request's identity under each ``SECRET_KEY_FALLBACKS`` key (hashed kinds only).
PreviousFunction = Callable[[Facts, "CompiledPolicy"], "tuple[str, ...]"]

#: What an override of a policy may name, by the kind of its key.
USERS, ADDRESSES, API_KEYS, API_CLIENTS = "users", "addresses", "api keys", "api clients"
#: An override of a sign-in policy may name an attempted username (``username:alice``).
USERNAMES = "usernames"


def _no_previous(facts: Facts, policy: CompiledPolicy) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True, slots=True)
class KeyKind:
    """One way of telling clients apart."""

    #: The name a policy's ``key`` spells (``header`` for ``header:<Name>``).
    name: str
    #: How the admin's filter and the docs name it.
    label: str
    #: Who a request counts as (``None``: not counted by this policy).
    identity: IdentityFunction
    #: The identity under each fallback secret, for overrides stored before a rotation.
    previous: PreviousFunction = _no_previous
    #: The identity reads whether the request has a user: a framework face decides it
    #: after its authentication.
    needs_user: bool = False
    #: The identity reads the session: a face decides it after the session middleware.
    needs_session: bool = False
    #: The identity is a keyed hash (never readable in a key name).
    hashed: bool = False
    #: Why a sign-in policy (``counts = sign_in_failures``) cannot count by it; ``""``: it can.
    not_for_sign_in: str = ""
    #: Only a sign-in has this identity: a policy of this kind counts nothing else.
    sign_in_only: bool = False
    #: One counter for every client (no lockout: one denial would lock everyone out).
    shared: bool = False
    #: What an override of such a policy may name (:data:`USERS`, :data:`ADDRESSES`...).
    overrides: frozenset[str] = field(default_factory=frozenset)
    #: The kinds a pair joins (empty for a single kind).
    parts: tuple[KeyKind, ...] = ()


# The identity functions, one per kind.


def _user(facts: Facts, policy: CompiledPolicy) -> str | None:
    user = facts.user
    if user is not None:
        return user_identity(user.pk)
    return principal(facts.auth)


def _ip(facts: Facts, policy: CompiledPolicy) -> str | None:
    return ip_identity(facts.address, policy.ipv6_prefix)


def _user_or_ip(facts: Facts, policy: CompiledPolicy) -> str | None:
    found = _user(facts, policy)
    return found if found is not None else _ip(facts, policy)


def _anon(facts: Facts, policy: CompiledPolicy) -> str | None:
    return None if facts.user is not None else _ip(facts, policy)


def _global(facts: Facts, policy: CompiledPolicy) -> str | None:
    return GLOBAL


def _username(facts: Facts, policy: CompiledPolicy) -> str | None:
    return None if facts.username is None else username_identity(facts.username)


def _header(facts: Facts, policy: CompiledPolicy) -> str | None:
    meta_key = policy.header_meta_key
    value = facts.header(meta_key) if meta_key else None
    return header_identity(meta_key, value) if value else _ip(facts, policy)


def session_identity(session_key: str) -> str:
    """``s:<32 hex>``: a session's identity, hashed (a session key is a secret)."""
    return f"s:{digest('session' + chr(0) + session_key)}"


def _session(facts: Facts, policy: CompiledPolicy) -> str | None:
    session_key = facts.session_key
    return session_identity(session_key) if session_key else _ip(facts, policy)


def _previous_principals(facts: Facts, policy: CompiledPolicy) -> tuple[str, ...]:
    if facts.user is not None:
        return ()
    text = principal_text(facts.auth)
    return () if text is None else rotation.principal_identities(text)


def _previous_headers(facts: Facts, policy: CompiledPolicy) -> tuple[str, ...]:
    meta_key = policy.header_meta_key
    value = facts.header(meta_key) if meta_key else None
    return rotation.header_identities(meta_key, value) if value else ()


_BY_USER = frozenset((USERS, API_CLIENTS))
_BY_ADDRESS = frozenset((USERS, ADDRESSES))

#: Every key kind, by name.
KEY_KINDS: dict[str, KeyKind] = {
    kind.name: kind
    for kind in (
        KeyKind(
            "user",
            "user",
            _user,
            _previous_principals,
            needs_user=True,
            not_for_sign_in="A failed sign-in has no user",
            overrides=_BY_USER,
        ),
        KeyKind("ip", "ip", _ip, overrides=_BY_ADDRESS),
        KeyKind(
            "user_or_ip",
            "user or ip",
            _user_or_ip,
            _previous_principals,
            needs_user=True,
            overrides=_BY_USER | _BY_ADDRESS,
        ),
        KeyKind(
            "anon",
            "anonymous, by ip",
            _anon,
            needs_user=True,
            not_for_sign_in=(
                "A signed-in client can attempt sign-ins too, and an anon policy never counts it"
            ),
            overrides=frozenset((ADDRESSES,)),
        ),
        KeyKind("global", "global", _global, shared=True, overrides=frozenset((USERS,))),
        KeyKind(
            "username",
            "attempted username",
            _username,
            hashed=True,
            sign_in_only=True,
            overrides=_BY_ADDRESS | {USERNAMES},
        ),
        KeyKind(
            "header",
            "a header",
            _header,
            _previous_headers,
            hashed=True,
            overrides=frozenset((USERS, ADDRESSES, API_KEYS)),
        ),
        KeyKind(
            "session",
            "session",
            _session,
            needs_session=True,
            hashed=True,
            overrides=_BY_ADDRESS,
        ),
    )
}

#: What joins the two kinds of a pair (``username+ip``).
PAIR = "+"
_SINGLE = "|".join(re.escape(name) for name in KEY_KINDS if name not in ("header", "global"))
_ONE = rf"({_SINGLE}|global|{HEADER_PREFIX}{HEADER_NAME_PATTERN})"
#: A policy's ``key``: one kind, or a pair of two different kinds (a header last, so that
#: a ``+`` in a header's name is never read as the pair's); the model's constraint.
_PAIRED = rf"({_SINGLE}){re.escape(PAIR)}({_SINGLE}|{HEADER_PREFIX}{HEADER_NAME_PATTERN})"
KEY_PATTERN = rf"^({_ONE}|{_PAIRED})\Z"
_KEY = re.compile(KEY_PATTERN)


def is_key(key: str) -> bool:
    """True for a key the registry knows (a kind, ``header:<Name>`` or a pair)."""
    if not _KEY.match(key or ""):
        return False
    first, _, second = key.partition(PAIR)
    return first != second


def kind_name(key: str) -> str:
    """The kind a single key names: ``header`` for ``header:<Name>``, else the key."""
    return "header" if key.startswith(HEADER_PREFIX) else key


@functools.lru_cache(maxsize=512)
def kind_of(key: str) -> KeyKind:
    """The kind a policy's ``key`` names (a pair's joins its two); ``KeyError`` for an
    unknown one."""
    if key.startswith(HEADER_PREFIX) or PAIR not in key:
        return KEY_KINDS[kind_name(key)]
    first, second = key.split(PAIR, 1)
    return _pair(KEY_KINDS[kind_name(first)], KEY_KINDS[kind_name(second)], key)


def _pair(first: KeyKind, second: KeyKind, name: str) -> KeyKind:
    def identity(facts: Facts, policy: CompiledPolicy) -> str | None:
        one = first.identity(facts, policy)
        if one is None:
            return None
        other = second.identity(facts, policy)
        return None if other is None else f"{one}{PAIR}{other}"

    return KeyKind(
        name,
        f"{first.label} and {second.label}",
        identity,
        needs_user=first.needs_user or second.needs_user,
        needs_session=first.needs_session or second.needs_session,
        hashed=first.hashed or second.hashed,
        not_for_sign_in=first.not_for_sign_in or second.not_for_sign_in,
        sign_in_only=first.sign_in_only or second.sign_in_only,
        # An override of a pair names a user (both parts count users), or one part's
        # address or username: it applies to every pair holding it (a block-list).
        overrides=(first.overrides & second.overrides & frozenset((USERS,)))
        | ((first.overrides | second.overrides) & frozenset((ADDRESSES, USERNAMES))),
        parts=(first, second),
    )


def keys_with_a_part(names: Iterable[str]) -> str:
    """A regular expression matching the keys that are, or pair, one of the kinds
    ``names`` (for the database constraints; never a ``header:<Name>`` key, whose name may
    hold a ``+``)."""
    alternatives = "|".join(re.escape(name) for name in names)
    return rf"^(?!{HEADER_PREFIX})([^+]*{re.escape(PAIR)})?({alternatives})({re.escape(PAIR)}.*)?\Z"


#: The keys only a sign-in has (``username``, ``username+ip``...).
SIGN_IN_ONLY_KEYS = keys_with_a_part(k.name for k in KEY_KINDS.values() if k.sign_in_only)
#: The keys a sign-in policy cannot count by (``user``, ``anon`` and their pairs).
NOT_FOR_SIGN_IN_KEYS = keys_with_a_part(k.name for k in KEY_KINDS.values() if k.not_for_sign_in)
#: A pair of one kind twice (``ip+ip``), refused by the database as by :func:`is_key`.
SAME_KIND_TWICE = rf"^([a-z_]+){re.escape(PAIR)}\1\Z"
#: The keys of one counter for every client (never in a pair).
SHARED_KEYS = tuple(k.name for k in KEY_KINDS.values() if k.shared)


#: Each identity form: its prefix, the kind of client it names, and whether it is a keyed
#: hash (never readable, in a key name or anywhere).
IDENTITY_FORMS = (
    ("u:", "user", False),
    ("u#", "user", True),
    ("ip:", "ip", False),
    ("h:", "header", True),
    ("a:", "api client", True),
    ("n:", "username", True),
    ("s:", "session", True),
)


def _form(identity: str) -> tuple[str, str, bool] | None:
    for form in IDENTITY_FORMS:
        if identity.startswith(form[0]):
            return form
    return None


def is_hashed(identity: str) -> bool:
    """True for an identity that is, or pairs, a keyed hash (header values, API principals,
    unusual user pks, attempted usernames, sessions)."""
    return any((form := _form(part)) is not None and form[2] for part in pair_parts(identity))


def describe(identity: str) -> str:
    """What kind of client ``identity`` is: ``user``, ``ip``, ``header``, ``api client``,
    ``username``, ``session``, ``global``, a pair (``username+ip``) or ``unknown``."""
    if identity == GLOBAL:
        return GLOBAL
    found = [_form(part) for part in pair_parts(identity)]
    return PAIR.join(form[1] for form in found) if all(found) else "unknown"  # type: ignore[index]


def pair_parts(identity: str) -> tuple[str, ...]:
    """The identities a pair's identity joins (``n:…+ip:203.0.113.7``), or the identity
    alone."""
    return tuple(identity.split(PAIR)) if PAIR in identity else (identity,)


def validate_key(value: str) -> None:
    """A policy's ``key``: a kind of :data:`KEY_KINDS`, ``header:<Name>``, or a pair of two
    different kinds (``username+ip``); ``ValidationError`` otherwise."""
    if is_key(value):
        return
    text = value or ""
    for part in (text, text.partition(PAIR)[2]):
        problem = header_name_problem(part)
        if problem is not None:
            raise problem
    singles = ", ".join(name for name in KEY_KINDS if name != "header")
    raise ValidationError(
        "%(value)r is not a client key. Use %(singles)s or header:<Name>, or two of them "
        "joined by + (username+ip).",
        code="invalid_key",
        params={"value": value, "singles": singles},
    )
