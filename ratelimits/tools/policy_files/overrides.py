"""The overrides of an imported row: each read and validated, then matched by the client it
names to the policy's stored overrides (created, updated, left alone or deleted)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError

from ratelimits.engine.policy import override_identity
from ratelimits.models import Policy, PolicyOverride
from ratelimits.tools.policy_files.errors import PolicyFileError, describe, validation_lines
from ratelimits.tools.policy_files.plans import OverridePlan, file_under
from ratelimits.tools.policy_files.schema import (
    OVERRIDE_FIELDS,
    OVERRIDE_TARGETS,
    OVERRIDE_VALUES,
    OVERRIDES,
)


@dataclass
class OverrideTargets:
    """The users and groups a file's overrides name, read in one query each."""

    users: dict[str, Any]
    groups: dict[str, Group]

    @classmethod
    def named_in(cls, rows: list[Any]) -> OverrideTargets:
        names: dict[str, set[str]] = {"user": set(), "group": set()}
        for row in rows:
            entries = row.get(OVERRIDES) if isinstance(row, dict) else None
            for entry in entries if isinstance(entries, list) else ():
                for kind, found in names.items():
                    value = entry.get(kind) if isinstance(entry, dict) else None
                    if isinstance(value, str):
                        found.add(value)
        users: dict[str, Any] = {}
        if names["user"]:
            model = get_user_model()
            lookup = {f"{model.USERNAME_FIELD}__in": names["user"]}
            users = {user.get_username(): user for user in model._default_manager.filter(**lookup)}
        groups: dict[str, Group] = {}
        if names["group"]:
            groups = {group.name: group for group in Group.objects.filter(name__in=names["group"])}
        return cls(users, groups)


def _target_of(override: PolicyOverride) -> tuple[str, Any]:
    """Who ``override`` names, as imports match overrides: ``("user", pk)``..."""
    if override.user_id is not None:
        return "user", override.user_id
    if override.group_id is not None:
        return "group", override.group_id
    return "identity", override.identity


def plan_overrides(
    entries: Any, policy: Policy, stored: list[PolicyOverride], targets: OverrideTargets
) -> tuple[OverridePlan | None, list[str]]:
    """Match a row's ``overrides`` to ``policy``'s stored ones by the client they name and
    validate each; returns the plan and the problems (``override N: field: message``)."""
    if not isinstance(entries, list):
        return None, [f"{OVERRIDES}: must be a list of overrides, not {describe(entries)}."]
    remaining = {_target_of(override): override for override in stored}
    plan = OverridePlan()
    problems: list[str] = []
    first: dict[tuple[str, Any], int] = {}
    for index, entry in enumerate(entries, start=1):
        where = f"override {index}"
        try:
            target, shown, values = _read_override(entry, policy, targets)
        except PolicyFileError as e:
            problems.extend(f"{where}: {problem}" for problem in e.problems)
            continue
        if target in first:
            problems.append(
                f"{where}: {target[0]}: {shown} is also override {first[target]}; "
                "a policy has one override per client."
            )
            continue
        first[target] = index
        override = remaining.pop(target, None)
        before = None
        if override is None:
            override = PolicyOverride(**values)
        else:
            before = {name: getattr(override, name) for name in OVERRIDE_VALUES}
            for name in OVERRIDE_VALUES:
                setattr(override, name, values[name])
        override.policy = policy  # as the file has it: its key normalises the identity
        try:
            # A new policy has no pk yet; the file's own duplicates are refused above.
            override.full_clean(exclude=["policy"] if policy.pk is None else None)
        except ValidationError as e:
            problems.extend(f"{where}: {line}" for line in validation_lines(e))
            continue
        file_under(plan, override, before, OVERRIDE_VALUES)
    plan.deleted = list(remaining.values())
    return plan, problems


def _read_override(
    entry: Any, policy: Policy, targets: OverrideTargets
) -> tuple[tuple[str, Any], str, dict[str, Any]]:
    """``(target, how to name it, model field values)`` of one override of a file;
    :class:`PolicyFileError` with every problem found."""
    if not isinstance(entry, dict):
        raise PolicyFileError(
            f"expected a mapping of field names to values, not {describe(entry)}."
        )
    problems: list[str] = []
    unknown = [key for key in entry if key not in OVERRIDE_FIELDS]
    if unknown:
        problems.append(
            f"unknown field(s) {', '.join(map(repr, unknown))}; "
            f"the fields are {', '.join(OVERRIDE_FIELDS)}."
        )
    values: dict[str, Any] = {
        "limit": entry.get("limit"),
        "exempt": entry.get("exempt", False),
        "comment": entry.get("comment", ""),
    }
    if values["limit"] is not None and type(values["limit"]) is not int:
        problems.append(f"limit: must be an integer, not {describe(values['limit'])}.")
    if not isinstance(values["exempt"], bool):
        problems.append(f"exempt: must be true or false, not {describe(values['exempt'])}.")
    if not isinstance(values["comment"], str):
        problems.append(f"comment: must be a string, not {describe(values['comment'])}.")

    named = [kind for kind in OVERRIDE_TARGETS if kind in entry]
    target: tuple[str, Any] | None = None
    shown = ""
    if len(named) != 1:
        problems.append(
            f"name exactly one of user, group or identity, not {' and '.join(named)}."
            if named
            else "name the client: a user, a group or an identity."
        )
    elif not isinstance(entry[named[0]], str) or not entry[named[0]].strip():
        problems.append(f"{named[0]}: must be a name, not {describe(entry[named[0]])}.")
    else:
        kind, text = named[0], entry[named[0]]
        if kind in ("user", "group"):
            found = (targets.users if kind == "user" else targets.groups).get(text)
            if found is None:
                problems.append(f"{kind}: there is no {kind} {text!r}.")
            else:
                target, shown, values[kind] = (kind, found.pk), repr(text), found
        else:
            try:
                stored = override_identity.normalize(text, policy.key or "")
            except ValueError as e:
                problems.append(f"identity: {e}")
            else:
                target = ("identity", stored)
                shown = override_identity.describe(stored)
                values["identity"] = stored
    if problems:
        raise PolicyFileError(problems)
    assert target is not None
    return target, shown, values
