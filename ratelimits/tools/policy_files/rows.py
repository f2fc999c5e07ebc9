"""One imported row read into a policy's field values: unknown and missing fields, the type
of each value and the model's default for each field left out. The model's own validation
comes after, in :mod:`~ratelimits.tools.policy_files.planning`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ratelimits.models import Policy
from ratelimits.tools.policy_files.schema import (
    FIELDS,
    OVERRIDES,
    REQUIRED_FIELDS,
    SET_BY,
    type_problem,
)


@dataclass
class RowValues:
    """What a row gives a policy, and what is wrong with it."""

    #: The fields to set: the row's values, the model's default for a field left out.
    values: dict[str, Any] = field(default_factory=dict)
    #: Fields left out of the model's validation: missing, or of the wrong type.
    bad: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


def policy_defaults() -> dict[str, Any]:
    """The model's default of every field a row holds."""
    return {name: Policy._meta.get_field(name).get_default() for name in FIELDS}


def read_row(row: dict[str, Any], defaults: dict[str, Any]) -> RowValues:
    """The field values of ``row``, each problem of its fields named (``field: message``)."""
    read = RowValues()
    _check_unknown_fields(row, read)
    _check_required_fields(row, read)
    _read_values(row, defaults, read)
    return read


def _check_unknown_fields(row: dict[str, Any], read: RowValues) -> None:
    unknown = [key for key in row if key not in FIELDS and key != OVERRIDES]
    if unknown:
        read.problems.append(
            f"unknown field(s) {', '.join(map(repr, unknown))}; "
            f"the fields are {', '.join(FIELDS)}, {OVERRIDES}."
        )


def _check_required_fields(row: dict[str, Any], read: RowValues) -> None:
    for required in REQUIRED_FIELDS:
        if required in row:
            continue
        if row.get(SET_BY.get(required, "")):  # a calendar period: the model sets it
            read.bad.add(required)  # not validated: the calendar's own check says enough
        else:
            needed = f" (or give a {SET_BY[required]})" if required in SET_BY else ""
            read.problems.append(f"{required}: this field is required{needed}.")
            read.bad.add(required)


def _read_values(row: dict[str, Any], defaults: dict[str, Any], read: RowValues) -> None:
    for name in FIELDS:
        if name not in row:
            if name not in REQUIRED_FIELDS:
                read.values[name] = defaults[name]
            continue
        problem = type_problem(name, row[name])
        if problem:
            read.problems.append(f"{name}: {problem}")
            read.bad.add(name)
        else:
            read.values[name] = row[name]
