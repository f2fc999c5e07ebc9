"""Overrides in the policy table: who gets another limit, or none, with no query per request.

The table compiles each policy's ``PolicyOverride`` rows into :class:`Overrides` when it
loads (with the members of every group an override names), so a request only does
dictionary lookups. A rule is the policy with the override's limit (same key, same
window, ``override`` naming the rule), or an :class:`Exemption`. The most specific
rule wins: the request's user, then a group the user is in (the most generous of several),
then its identity exactly (an address, a hashed API key), then the narrowest network
holding it, then the policy itself.

Group membership is read when the table loads; a user joining or leaving an overridden
group is announced like a policy edit (:func:`ratelimits.signals.on_group_membership_changed`),
so every worker sees it within ``POLICY_REFRESH_INTERVAL``.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeAlias

from ratelimits import override_identity

if TYPE_CHECKING:
    from ratelimits.policy_table import CompiledPolicy

logger = logging.getLogger("ratelimits")

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class Exemption:
    """An override that exempts its clients; ``override`` names it ("group staff")."""

    override: str


#: What applies to a client: a policy (maybe with an override's limit), or an exemption.
_Rule: TypeAlias = "CompiledPolicy | Exemption"


@dataclass(frozen=True, slots=True)
class Overrides:
    """One policy's overrides, indexed for a request."""

    users: dict[str, _Rule]
    groups: tuple[tuple[frozenset[str], _Rule], ...]
    identities: dict[str, _Rule]
    networks: tuple[tuple[_Network, _Rule], ...]  # narrowest first

    def resolve(
        self, policy: CompiledPolicy, user_key: str | None, identity: str
    ) -> CompiledPolicy | None:
        """The policy to apply to a request by user ``user_key`` (``str(pk)``, ``None`` when
        anonymous) counted as ``identity``; ``None`` when exempt."""
        rule = self.rule(policy, user_key, identity)
        return None if isinstance(rule, Exemption) else rule

    def rule(self, policy: CompiledPolicy, user_key: str | None, identity: str) -> _Rule:
        """The rule that applies (``policy`` itself when no override names the client)."""
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
        if self.networks:
            client = override_identity.network_of(identity)
            if client is not None:
                for network, rule in self.networks:
                    if client.version == network.version and client.overlaps(network):
                        return rule
        return policy


def _most_generous(rules: Sequence[_Rule]) -> _Rule:
    for rule in rules:
        if isinstance(rule, Exemption):
            return rule
    return max(rules, key=lambda rule: rule.limit)  # type: ignore[union-attr]


def user_key(request: Any) -> str | None:
    """The key of ``request``'s user in :attr:`Overrides.users` (``None`` when anonymous)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    return str(user.pk)


def compile_rules(
    policy: CompiledPolicy, rows: Iterable[Any], members: dict[int, frozenset[str]]
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
            rule = _rule(policy, row, override_identity.describe(row.identity))
            network = override_identity.network_of(row.identity)
            if network is None or (network.num_addresses == 1 and network.version == 4):
                identities[row.identity] = rule
            else:
                networks.append((network, rule))
    if not (users or groups or identities or networks):
        return None
    networks.sort(key=lambda item: item[0].prefixlen, reverse=True)
    return Overrides(users, tuple(groups), identities, tuple(networks))


def _rule(policy: CompiledPolicy, row: Any, label: str) -> _Rule:
    if row.exempt:
        return Exemption(label)
    return policy.with_limit(int(row.limit), override=label)


def load(policies: Sequence[CompiledPolicy], ids: dict[str, int]) -> list[CompiledPolicy]:
    """``policies`` with their overrides attached (two queries, three with groups);
    ``ids`` maps a policy's name to its pk."""
    from ratelimits.models import PolicyOverride

    by_policy: dict[int, list[Any]] = {}
    rows = PolicyOverride.objects.filter(policy_id__in=ids.values()).select_related("user", "group")
    for row in rows:
        by_policy.setdefault(row.policy_id, []).append(row)
    if not by_policy:
        return list(policies)
    members = _group_members({row.group_id for found in by_policy.values() for row in found})
    return [
        replace(policy, overrides=compile_rules(policy, by_policy[ids[policy.name]], members))
        if ids[policy.name] in by_policy
        else policy
        for policy in policies
    ]


def _group_members(group_ids: set[int | None]) -> dict[int, frozenset[str]]:
    """The users' keys of each group, for the groups overrides name (one query)."""
    from django.contrib.auth import get_user_model

    wanted = {pk for pk in group_ids if pk is not None}
    if not wanted:
        return {}
    groups = getattr(get_user_model(), "groups", None)
    if groups is None:
        logger.warning("ratelimits: the user model has no groups; group overrides never match.")
        return {}
    found: dict[int, set[str]] = {pk: set() for pk in wanted}
    through = groups.through
    user_column = groups.field.m2m_field_name()
    group_column = groups.field.m2m_reverse_field_name()
    for user_pk, group_pk in through.objects.filter(**{f"{group_column}__in": wanted}).values_list(
        user_column, group_column
    ):
        found[group_pk].add(str(user_pk))
    return {pk: frozenset(users) for pk, users in found.items()}
