"""The import plan: the rows of a policy file matched to the stored policies by name and
validated, and what importing them would change; nothing is written."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from ratelimits.models import Policy, PolicyOverride
from ratelimits.tools.policy_files.errors import PolicyFileError, describe, validation_lines
from ratelimits.tools.policy_files.overrides import OverrideTargets, plan_overrides
from ratelimits.tools.policy_files.plans import ImportPlan, OverridePlan
from ratelimits.tools.policy_files.schema import (
    FIELDS,
    OVERRIDES,
    REQUIRED_FIELDS,
    SET_BY,
    policy_row,
    type_problem,
)


def plan_import(rows: list[dict[str, Any]], *, prune: bool = False) -> ImportPlan:
    """Match ``rows`` to the stored policies by name and validate them all; writes nothing.

    Raises :class:`PolicyFileError` listing every problem of every row. A field missing
    from a row takes the model's default, also for an existing policy (see
    :mod:`ratelimits.tools.policy_files`). With ``prune``, stored policies missing from
    ``rows`` are to be deleted.
    """
    existing = {policy.name: policy for policy in Policy.objects.all()}
    defaults = {name: Policy._meta.get_field(name).get_default() for name in FIELDS}
    stored_overrides: dict[int, list[PolicyOverride]] = {}
    if prune or any(isinstance(row, dict) and OVERRIDES in row for row in rows):
        for override in PolicyOverride.objects.select_related("user", "group").order_by("pk"):
            stored_overrides.setdefault(override.policy_id, []).append(override)
    targets = OverrideTargets.named_in(rows)
    plan = ImportPlan()
    problems: list[str] = []
    first_row: dict[str, int] = {}

    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            problems.append(
                f"row {number}: expected a mapping of field names to values, not {describe(row)}."
            )
            continue
        name = row.get("name")
        label = f"row {number}"
        if isinstance(name, str) and name:
            label += f" ({name})" if name.isprintable() else f" ({name!r})"
        row_problems: list[str] = []
        bad: set[str] = set()

        unknown = [key for key in row if key not in FIELDS and key != OVERRIDES]
        if unknown:
            row_problems.append(
                f"unknown field(s) {', '.join(map(repr, unknown))}; "
                f"the fields are {', '.join(FIELDS)}, {OVERRIDES}."
            )
        for required in REQUIRED_FIELDS:
            if required in row:
                continue
            if row.get(SET_BY.get(required, "")):  # a calendar period: the model sets it
                bad.add(required)  # not validated: the calendar's own check says enough
            else:
                needed = f" (or give a {SET_BY[required]})" if required in SET_BY else ""
                row_problems.append(f"{required}: this field is required{needed}.")
                bad.add(required)
        values: dict[str, Any] = {}
        for fname in FIELDS:
            if fname not in row:
                if fname not in REQUIRED_FIELDS:
                    values[fname] = defaults[fname]
                continue
            problem = type_problem(fname, row[fname])
            if problem:
                row_problems.append(f"{fname}: {problem}")
                bad.add(fname)
            else:
                values[fname] = row[fname]

        duplicate = False
        if "name" not in bad:
            if name in first_row:
                row_problems.append(
                    f"name: {name!r} is also the name of row {first_row[name]}; "
                    "names must be unique."
                )
                duplicate = True
            else:
                first_row[name] = number

        stored = None if duplicate or "name" in bad else existing.get(name)
        if stored is not None:
            policy = stored
            before = policy_row(stored)
        else:
            policy = Policy()
            before = None
        for fname, value in values.items():
            setattr(policy, fname, value)
        exclude = set(bad)
        if duplicate:
            exclude.add("name")  # validated with its first row
        try:
            policy.full_clean(exclude=sorted(exclude) or None)
        except ValidationError as e:
            row_problems.extend(validation_lines(e))

        overrides = None
        if OVERRIDES in row:
            stored_list = stored_overrides.get(stored.pk, []) if stored is not None else []
            overrides, found = plan_overrides(row[OVERRIDES], policy, stored_list, targets)
            row_problems.extend(found)

        if row_problems:
            problems.extend(f"{label}: {problem}" for problem in row_problems)
            continue
        if before is None:
            plan.created.append(policy)
        else:
            changed = [fname for fname in FIELDS if getattr(policy, fname) != before[fname]]
            if changed:
                plan.updated.append((policy, changed))
            else:
                plan.unchanged.append(policy)
        if overrides is not None:
            plan.overrides[policy.name] = overrides

    if problems:
        raise PolicyFileError(problems)
    if prune:
        plan.pruned = [policy for name, policy in sorted(existing.items()) if name not in first_row]
        for policy in plan.pruned:
            if stored_overrides.get(policy.pk):
                plan.overrides[policy.name] = OverridePlan(deleted=stored_overrides[policy.pk])
    return plan
