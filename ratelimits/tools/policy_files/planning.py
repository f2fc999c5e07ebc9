"""The import plan: the rows of a policy file matched to the stored policies by name and
validated, and what importing them would change; nothing is written."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from ratelimits.models import Policy, PolicyOverride
from ratelimits.tools.policy_files.errors import PolicyFileError, describe, validation_lines
from ratelimits.tools.policy_files.overrides import OverrideTargets, plan_overrides
from ratelimits.tools.policy_files.plans import ImportPlan, OverridePlan, file_under
from ratelimits.tools.policy_files.rows import RowValues, policy_defaults, read_row
from ratelimits.tools.policy_files.schema import FIELDS, OVERRIDES, policy_row


def plan_import(rows: list[dict[str, Any]], *, prune: bool = False) -> ImportPlan:
    """Match ``rows`` to the stored policies by name and validate them all; writes nothing.

    Raises :class:`PolicyFileError` listing every problem of every row. A field missing
    from a row takes the model's default, also for an existing policy (see
    :mod:`ratelimits.tools.policy_files`). With ``prune``, stored policies missing from
    ``rows`` are to be deleted.
    """
    stored = _Stored.read(rows, prune=prune)
    plan = ImportPlan()
    first_row: dict[str, int] = {}
    problems: list[str] = []
    for number, row in enumerate(rows, start=1):
        problems.extend(_plan_row(plan, number, row, stored, first_row))
    if problems:
        raise PolicyFileError(problems)
    if prune:
        _plan_pruning(plan, stored, named=first_row.keys())
    return plan


@dataclass
class _Stored:
    """What an import compares its rows with, each read once: the stored policies by name,
    their overrides by policy, the users and groups the file names, the model's defaults."""

    policies: dict[str, Policy]
    overrides: dict[int, list[PolicyOverride]]
    targets: OverrideTargets
    defaults: dict[str, Any]

    @classmethod
    def read(cls, rows: list[Any], *, prune: bool) -> _Stored:
        policies = {policy.name: policy for policy in Policy.objects.all()}
        overrides: dict[int, list[PolicyOverride]] = {}
        if prune or any(isinstance(row, dict) and OVERRIDES in row for row in rows):
            for override in PolicyOverride.objects.select_related("user", "group").order_by("pk"):
                overrides.setdefault(override.policy_id, []).append(override)
        return cls(policies, overrides, OverrideTargets.named_in(rows), policy_defaults())

    def overrides_of(self, policy: Policy | None) -> list[PolicyOverride]:
        return self.overrides.get(policy.pk, []) if policy is not None else []


def _plan_row(
    plan: ImportPlan, number: int, row: Any, stored: _Stored, first_row: dict[str, int]
) -> list[str]:
    """Add row ``number`` to ``plan`` if it is valid; else its problems, each after its label."""
    if not isinstance(row, dict):
        return [f"row {number}: expected a mapping of field names to values, not {describe(row)}."]
    name = row.get("name")
    read = read_row(row, stored.defaults)
    duplicate = _is_duplicate_name(name, number, read, first_row)
    existing = None if duplicate or "name" in read.bad else stored.policies.get(name)
    policy, before = _policy_of_row(existing, read)
    read.problems.extend(_model_problems(policy, read, duplicate=duplicate))
    overrides = _row_overrides(row, policy, existing, stored, read)
    if read.problems:
        label = _row_label(number, name)
        return [f"{label}: {problem}" for problem in read.problems]
    file_under(plan, policy, before, FIELDS)
    if overrides is not None:
        plan.overrides[policy.name] = overrides
    return []


def _row_label(number: int, name: Any) -> str:
    """``row 3 (login)``: how problems name a row, its name shown when it has one."""
    label = f"row {number}"
    if isinstance(name, str) and name:
        label += f" ({name})" if name.isprintable() else f" ({name!r})"
    return label


def _is_duplicate_name(name: Any, number: int, read: RowValues, first_row: dict[str, int]) -> bool:
    """Whether an earlier row has the (valid) ``name``, a problem then; else the name is
    recorded as row ``number``'s."""
    if "name" in read.bad:
        return False
    if name in first_row:
        read.problems.append(
            f"name: {name!r} is also the name of row {first_row[name]}; names must be unique."
        )
        return True
    first_row[name] = number
    return False


def _policy_of_row(
    existing: Policy | None, read: RowValues
) -> tuple[Policy, dict[str, Any] | None]:
    """The policy a row describes (the stored one or a new one, with the row's values) and the
    stored fields before (``None`` for a new policy)."""
    policy = existing if existing is not None else Policy()
    before = policy_row(existing) if existing is not None else None
    for name, value in read.values.items():
        setattr(policy, name, value)
    return policy, before


def _model_problems(policy: Policy, read: RowValues, *, duplicate: bool) -> list[str]:
    """The model's ``full_clean()`` of ``policy``, but for the fields the row got wrong."""
    exclude = set(read.bad)
    if duplicate:
        exclude.add("name")  # validated with its first row
    try:
        policy.full_clean(exclude=sorted(exclude) or None)
    except ValidationError as e:
        return validation_lines(e)
    return []


def _row_overrides(
    row: dict[str, Any], policy: Policy, existing: Policy | None, stored: _Stored, read: RowValues
) -> OverridePlan | None:
    """The plan of the row's ``overrides``, their problems added to ``read``; ``None`` when
    the row leaves the policy's overrides alone."""
    if OVERRIDES not in row:
        return None
    stored_overrides = stored.overrides_of(existing)
    overrides, problems = plan_overrides(row[OVERRIDES], policy, stored_overrides, stored.targets)
    read.problems.extend(problems)
    return overrides


def _plan_pruning(plan: ImportPlan, stored: _Stored, *, named: Container[str]) -> None:
    """The stored policies no row names are to be deleted, with their overrides."""
    plan.pruned = [policy for name, policy in sorted(stored.policies.items()) if name not in named]
    for policy in plan.pruned:
        if stored.overrides.get(policy.pk):
            plan.overrides[policy.name] = OverridePlan(deleted=stored.overrides[policy.pk])
