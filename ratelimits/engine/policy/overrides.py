"""Overrides in the policy table: who gets another limit, or none, with no query per request.

The table compiles each policy's ``PolicyOverride`` rows into :class:`Overrides` when it
loads (with the members of every group an override names), so a request only does
dictionary lookups. A rule is the policy with the override's limit (same key, same
window, ``override`` naming the rule), or an :class:`Exemption`. The most specific
rule wins: the request's user, then a group the user is in (the most generous of several),
then its identity exactly (an address, a hashed API key or username; a key hashed under a
``SECRET_KEY_FALLBACKS`` key too, :mod:`ratelimits.engine.keys.rotation`), or either part of
a pair's (``username+ip``), then the narrowest network holding it, then the policy itself.
An override of limit 0 blocks its clients: every request denied with no Redis call
(:func:`ratelimits.engine.attempt.blocked_verdict`), a block-list.

Group membership is read when the table loads (:mod:`ratelimits.database.policy_source`); a user
joining or leaving an overridden group is announced like a policy edit
(:mod:`ratelimits.database.receivers`), so every worker sees it within ``POLICY_REFRESH_INTERVAL``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

from ratelimits.engine.keys.kinds import PAIR
from ratelimits.engine.keys.rotation import HASHED_SECRETS
from ratelimits.engine.policy.override_identity import describe as describe_identity
from ratelimits.engine.policy.override_identity import network_of

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class Exemption:
    """An override that exempts its clients; ``override`` names it ("group staff")."""

    override: str


class Limited(Protocol):
    """What overrides need of a policy (:class:`~.compiled.CompiledPolicy`)."""

    @property
    def limit(self) -> int: ...

    def with_limit(self, limit: int, *, override: str) -> Any: ...


_P = TypeVar("_P", bound=Limited)

#: What applies to a client: a policy (maybe with an override's limit), or an exemption.
_Rule: TypeAlias = "Limited | Exemption"
#: The request's identity under each ``SECRET_KEY_FALLBACKS`` key, asked for only when
#: needed (:mod:`ratelimits.engine.keys.rotation`): empty when its identity is no hash of
#: a secret, or there are no fallback keys.
Previous: TypeAlias = "Callable[[], Iterable[str]]"


@dataclass(frozen=True, slots=True)
class Overrides:
    """One policy's overrides, indexed for a request."""

    users: dict[str, _Rule]
    groups: tuple[tuple[frozenset[str], _Rule], ...]
    identities: dict[str, _Rule]
    networks: tuple[tuple[_Network, _Rule], ...]  # narrowest first
    #: True when an identity override is a hashed secret (an API key, an API client),
    #: which may have been hashed under a key now in ``SECRET_KEY_FALLBACKS``.
    hashed: bool = False

    def resolve(
        self, policy: _P, user_key: str | None, identity: str, previous: Previous | None = None
    ) -> _P | None:
        """The policy to apply to a request by user ``user_key`` (``str(pk)``, ``None`` when
        anonymous) counted as ``identity``; ``None`` when exempt."""
        rule = self.rule(policy, user_key, identity, previous)
        return None if isinstance(rule, Exemption) else rule  # type: ignore[return-value]

    def rule(
        self, policy: Limited, user_key: str | None, identity: str, previous: Previous | None = None
    ) -> _Rule:
        """The rule that applies (``policy`` itself when no override names the client).

        ``previous`` gives the client's identity under each ``SECRET_KEY_FALLBACKS`` key;
        it is called only when this policy has hashed overrides and none matched
        ``identity``, so a hashed override stored before a key rotation still matches."""
        if user_key is not None:
            rule = self.users.get(user_key, _MISSING)
            if rule is not _MISSING:
                return rule
            found = [rule for members, rule in self.groups if user_key in members]
            if found:
                return _most_generous(found)
        rule = self.identities.get(identity, _MISSING)
        if rule is not _MISSING:
            return rule
        if self.hashed and previous is not None:
            for alias in previous():
                rule = self.identities.get(alias, _MISSING)
                if rule is not _MISSING:
                    return rule
        # A pair (username+ip) is named by either part: an address, a username.
        parts = identity.split(PAIR) if PAIR in identity else (identity,)
        if len(parts) > 1:
            for part in parts:
                rule = self.identities.get(part, _MISSING)
                if rule is not _MISSING:
                    return rule
        if self.networks:
            for part in parts:
                client = network_of(part)
                if client is None:
                    continue
                for network, rule in self.networks:
                    if client.version == network.version and client.overlaps(network):
                        return rule
        return policy


def _most_generous(rules: Sequence[_Rule]) -> _Rule:
    for rule in rules:
        if isinstance(rule, Exemption):
            return rule
    return max(rules, key=lambda rule: rule.limit)  # type: ignore[union-attr]


def compile_rules(
    policy: Limited, rows: Iterable[Any], members: dict[int, frozenset[str]]
) -> Overrides | None:
    """``policy``'s override rows (``PolicyOverride`` objects, user and group loaded) as
    :class:`Overrides`; ``members`` maps a group's pk to its users' keys."""
    users: dict[str, _Rule] = {}
    groups: list[tuple[frozenset[str], _Rule]] = []
    identities: dict[str, _Rule] = {}
    networks: list[tuple[_Network, _Rule]] = []
    for row in rows:
        if row.user_id is not None:
            users[str(row.user_id)] = _rule(policy, row, f"user {row.user}")
        elif row.group_id is not None:
            rule = _rule(policy, row, f"group {row.group}")
            groups.append((members.get(row.group_id, frozenset()), rule))
        else:
            rule = _rule(policy, row, describe_identity(row.identity))
            network = network_of(row.identity)
            if network is None or (network.num_addresses == 1 and network.version == 4):
                identities[row.identity] = rule
            else:
                networks.append((network, rule))
    if not (users or groups or identities or networks):
        return None
    networks.sort(key=lambda item: item[0].prefixlen, reverse=True)
    hashed = any(identity.startswith(HASHED_SECRETS) for identity in identities)
    return Overrides(users, tuple(groups), identities, tuple(networks), hashed)


def _rule(policy: Limited, row: Any, label: str) -> _Rule:
    if row.exempt:
        return Exemption(label)
    return policy.with_limit(int(row.limit), override=label)
