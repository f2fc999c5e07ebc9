"""The policy table's source: the enabled ``Policy`` rows and their overrides, compiled.

``AppConfig.ready()`` hands :func:`load` to :func:`ratelimits.engine.table.set_source`, so
the engine reads the database without knowing the models. A load is one query for the
policies, one for their overrides, and one more for the members of the groups that
overrides name. A table rebuilt in a background thread opens that thread's own database
connection; :func:`close_connections` closes it when the build is over.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connections

from ratelimits.engine.overrides import compile_rules
from ratelimits.engine.policy import CompiledPolicy
from ratelimits.models import Policy, PolicyOverride

logger = logging.getLogger("ratelimits")


def load() -> list[CompiledPolicy]:
    """The enabled policies, compiled, with their overrides attached."""
    rows = list(Policy.objects.filter(enabled=True))
    compiled = [CompiledPolicy.from_model(p) for p in rows]
    return with_overrides(compiled, {p.name: p.pk for p in rows})


def close_connections() -> None:
    """Close this thread's database connections (a background build's thread, whose
    connections no request cycle closes)."""
    connections.close_all()


def with_overrides(policies: list[CompiledPolicy], ids: dict[str, int]) -> list[CompiledPolicy]:
    """``policies`` with their overrides attached; ``ids`` maps a policy's name to its pk."""
    by_policy: dict[int, list[Any]] = {}
    rows = PolicyOverride.objects.filter(policy_id__in=ids.values()).select_related("user", "group")
    for row in rows:
        by_policy.setdefault(row.policy_id, []).append(row)
    if not by_policy:
        return policies
    members = _group_members({row.group_id for found in by_policy.values() for row in found})
    return [
        replace(policy, overrides=compile_rules(policy, by_policy[ids[policy.name]], members))
        if ids[policy.name] in by_policy
        else policy
        for policy in policies
    ]


def _group_members(group_ids: set[int | None]) -> dict[int, frozenset[str]]:
    """The users' keys of each group, for the groups overrides name (one query)."""
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
