"""The policy table's source: the enabled ``Policy`` rows and their overrides, compiled.

``AppConfig.ready()`` hands :func:`load` to :func:`ratelimits.engine.table.set_source`, so
the engine reads the database without knowing the models. A load is one query for the
overrides of enabled policies, one more for the members of the groups that overrides
name, and one for the policies, read a few rows at a time as the table takes them (a
background build gives other threads the GIL between policies). A policy whose row is
unchanged since the previous load is not compiled again: only the policies changed since
are. A table rebuilt in a background thread opens that thread's own database connection;
:func:`close_connections` closes it when the build is over.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from django.contrib.auth import get_user_model
from django.core.signals import setting_changed
from django.db import connections, router
from django.db.models import QuerySet
from django.db.models.sql.constants import MULTI

from ratelimits.engine.overrides import compile_rules
from ratelimits.engine.pacing import pause
from ratelimits.engine.policy import CompiledPolicy
from ratelimits.models import Policy, PolicyOverride

logger = logging.getLogger("ratelimits")

#: Policy rows read per database fetch (a step of a paced build reads at most this many).
CHUNK = 64

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
    query = Policy.objects.using(database).filter(enabled=True).order_by("name")
    query = query.values_list(*fields)
    pause()
    overrides = _Overrides.read(PolicyOverride.objects.using(database))
    rows, convert = _raw_rows(query)
    pause()
    pk = fields.index(Policy._meta.pk.attname)
    known, seen = _compiled, {}
    for row in rows:
        key = row[pk]
        entry = known.get(key)
        if entry is None or entry[0] != row:
            policy = Policy.from_db(query.db, fields, convert(row))
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


def _raw_rows(
    query: QuerySet[Any, tuple[Any, ...]],
) -> tuple[Iterator[tuple[Any, ...]], Callable[[tuple[Any, ...]], list[Any]]]:
    """The rows of ``query`` (a ``values_list()``, run now) as the database driver hands
    them over, :data:`CHUNK` at a time, and what converts one into the values
    ``values_list()`` would give (the backend's and the fields' converters, as Django's
    own iterable applies them). A load compares raw rows with the previous load's and
    converts only those that changed: converting every row cost a fifth of a build."""
    compiler = query.query.get_compiler(query.db)
    chunks = compiler.execute_sql(MULTI, chunked_fetch=True, chunk_size=CHUNK)
    columns = [column for column, _, _ in compiler.select[: compiler.col_count]]
    converters = compiler.get_converters(columns)

    def convert(row: tuple[Any, ...]) -> list[Any]:
        return next(iter(compiler.apply_converters([list(row)], converters)))

    return itertools.chain.from_iterable(chunks), convert


def row_fields() -> list[str]:
    """The ``Policy`` columns a load reads: all but the timestamps a save sets
    (``auto_now``, ``auto_now_add``), which compile to nothing and are the costliest to
    read. A policy built from them leaves those fields deferred."""
    return [
        field.attname
        for field in Policy._meta.concrete_fields
        if not (getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False))
    ]


def reset() -> None:
    """Forget the policies compiled by the previous load (the next compiles them all)."""
    global _compiled
    _compiled = {}


def _reset_on_setting_change(**kwargs: Any) -> None:
    reset()  # a setting may change how a policy compiles (a default time zone...)


setting_changed.connect(_reset_on_setting_change, dispatch_uid="ratelimits.database.policy_source")


def close_connections() -> None:
    """Close this thread's database connections (a background build's thread, whose
    connections no request cycle closes)."""
    connections.close_all()


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
    def read(cls, found: QuerySet[PolicyOverride]) -> _Overrides:
        rows: dict[int, list[Any]] = {}
        for row in found.select_related("user", "group"):
            rows.setdefault(row.policy_id, []).append(row)
        pause()
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
