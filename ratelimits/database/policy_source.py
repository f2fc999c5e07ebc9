"""The policy table's source: the enabled ``Policy`` rows and their overrides, compiled.

``AppConfig.ready()`` hands :func:`load` to :func:`ratelimits.engine.table.current.set_source`, so
the engine reads the database without knowing the models. A load asks whether there is
any override; if so it reads them, the users and the groups they name, and those groups'
members; then the policies, a few rows at a time as the table takes them (a background
build gives other threads the GIL between policies). Each is a short query, and the two
a load always runs are compiled once per connection
(:mod:`~ratelimits.database.compiled_queries`): a paced build cannot pause inside a query. A
policy whose row is unchanged since the previous load is not compiled again: only the
policies changed since are. A table rebuilt in the keeper thread uses that thread's own
database connection; :func:`close_connections` closes it when the build is over, as the
end of a request would (a persistent one, ``CONN_MAX_AGE``, is kept for the next build).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from django.contrib.auth import get_user_model
from django.db import close_old_connections, connections, router
from django.db.models import QuerySet

from ratelimits.conf import ANY_SETTING, resets_on_setting_change
from ratelimits.database import compiled_queries
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.policy.overrides import compile_rules
from ratelimits.engine.table.pacing import pause
from ratelimits.models import Policy, PolicyOverride

logger = logging.getLogger("ratelimits")

#: Policy rows read per database fetch (a step of a paced build reads at most this many).
CHUNK = 16

#: Each enabled policy's row (its :func:`row_fields`) as the last load read it, by primary
#: key, with the policy compiled from it. A load that reads the same row again keeps the
#: entry whole, so its new copy of the row is freed at once (rows that survived would
#: make the garbage collector's long-lived generation grow, and its full collections,
#: which stop every thread, come sooner).
_compiled: dict[Any, tuple[tuple[Any, ...], CompiledPolicy]] = {}


def load() -> Iterator[CompiledPolicy]:
    """The enabled policies, compiled, in name order, with their overrides attached.

    A policy is compiled only when its row differs from the one the previous load read;
    otherwise the policy compiled then is reused (the same object: the table re-indexes
    only the others)."""
    global _compiled
    database = router.db_for_read(Policy)
    connections[database].ensure_connection()
    pause()
    fields = row_fields()
    query = compiled_queries.prepare("policies", database, lambda: _policy_rows(database, fields))
    pause()
    overrides = _Overrides.read(PolicyOverride.objects.using(database), database)
    pause()
    rows = query.rows(database, CHUNK)
    pk = fields.index(Policy._meta.pk.attname)
    known, seen = _compiled, {}
    for row in rows:
        key = row[pk]
        entry = known.get(key)
        if entry is None or entry[0] != row:
            policy = Policy.from_db(database, fields, query.convert(row, database))
            compiled = _compile(policy)
            if compiled is None:
                continue
            entry = (row, compiled)
        seen[key] = entry
        yield overrides.attach(entry[1], key) if overrides.rows else entry[1]
    _compiled = seen  # one reference replaced whole: a load running meanwhile reads either


def _compile(policy: Policy) -> CompiledPolicy | None:
    """``policy`` compiled; ``None``, with an error logged, for a row this machine cannot
    compile (a calendar policy in a time zone its zoneinfo does not know, say): the
    policy limits nothing until the row or the machine is fixed, and every other policy
    still does (the table is not refused whole). Not remembered: the next load tries
    again. The system check ``ratelimits.W005`` names such rows too."""
    try:
        return CompiledPolicy.from_model(policy)
    except ValueError as error:
        logger.error("ratelimits: policy %s is left out of the table: %s", policy.name, error)
        return None


def _policy_rows(database: str, fields: list[str]) -> QuerySet[Any, tuple[Any, ...]]:
    """The enabled policies' rows (``fields``) in name order. A load compares them, raw,
    with the previous load's and converts only those that changed: converting every row
    cost a fifth of a build."""
    query = Policy.objects.using(database).filter(enabled=True).order_by("name")
    return query.values_list(*fields)


def _any_override(database: str) -> bool:
    """Whether ``database`` holds any override (a one-row query, compiled once)."""
    query = compiled_queries.prepare(
        "any override",
        database,
        lambda: PolicyOverride.objects.using(database).order_by().values_list("pk")[:1],
    )
    return bool(list(query.rows(database, 1)))


def row_fields() -> list[str]:
    """The ``Policy`` columns a load reads: all but the timestamps a save sets
    (``auto_now``, ``auto_now_add``), which compile to nothing and are the costliest to
    read. A policy built from them leaves those fields deferred."""
    return [
        field.attname
        for field in Policy._meta.concrete_fields
        if not (getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False))
    ]


@resets_on_setting_change(ANY_SETTING)  # a setting may change how a policy compiles (TIME_ZONE)
def reset() -> None:
    """Forget the policies compiled by the previous load (the next compiles them all)."""
    global _compiled
    _compiled = {}


def close_connections() -> None:
    """After a build in the keeper thread, whose connections no request cycle closes:
    close this thread's connections as the end of a request would, so that they follow
    ``CONN_MAX_AGE`` (the default, 0, closes them; a persistent connection is kept for
    the next build, unless it failed or is too old)."""
    close_old_connections()


def with_overrides(policies: list[CompiledPolicy], ids: dict[str, int]) -> list[CompiledPolicy]:
    """``policies`` with their overrides attached; ``ids`` maps a policy's name to its pk."""
    overrides = _Overrides.read(PolicyOverride.objects.filter(policy_id__in=ids.values()))
    if not overrides.rows:
        return policies
    return [overrides.attach(policy, ids[policy.name]) for policy in policies]


@dataclass(frozen=True)
class _Overrides:
    """Override rows by their policy's pk, and the members of the groups they name."""

    rows: dict[int, list[Any]]
    members: dict[int, frozenset[str]]

    @classmethod
    def read(cls, found: QuerySet[PolicyOverride], database: str | None = None) -> _Overrides:
        """The override rows of ``found``, their users and groups, and those groups'
        members, in short queries (a paced build pauses between them). With ``database``
        (``found`` is all of its overrides) whether there is any row at all is asked
        first, by a query compiled once: the common case is none."""
        if database is not None and not _any_override(database):
            return cls({}, {})
        pause()
        listed = list(found.order_by("policy_id", "pk"))
        pause()
        rows: dict[int, list[Any]] = {}
        for row in _with_targets(listed, found.db):
            rows.setdefault(row.policy_id, []).append(row)
        groups = {row.group_id for found in rows.values() for row in found}
        members = _group_members(groups) if rows else {}
        pause()
        return cls(rows, members)

    def attach(self, policy: CompiledPolicy, pk: int) -> CompiledPolicy:
        """``policy`` (stored with primary key ``pk``) with its overrides, if it has any."""
        found = self.rows.get(pk)
        if not found:
            return policy
        return replace(policy, overrides=compile_rules(policy, found, self.members))


def _with_targets(rows: list[PolicyOverride], database: str) -> list[PolicyOverride]:
    """``rows`` with the users and the groups they name loaded, as ``select_related``
    would, in one short query per kind instead of one long one. A row whose user or
    group was deleted between the queries is left out: its own deletion follows."""
    for name in ("user", "group"):
        field = PolicyOverride._meta.get_field(name)
        wanted = {getattr(row, field.attname) for row in rows} - {None}
        if not wanted:
            continue
        loaded = field.related_model._base_manager.using(database).in_bulk(wanted)
        kept = []
        for row in rows:
            target_pk = getattr(row, field.attname)
            if target_pk is not None:
                if target_pk not in loaded:
                    continue
                field.set_cached_value(row, loaded[target_pk])
            kept.append(row)
        rows = kept
        pause()
    return rows


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
