"""Policy files: export the policy table to JSON or YAML and import it back.

The engine behind ``manage.py ratelimits export/import``. A policy file is::

    {"version": 1, "policies": [{"name": ..., "endpoint": ..., ...}, ...]}

with the fields of :data:`FIELDS` in every row (``version`` may be left out; a bare list of
rows is accepted too). An import is done in two steps: :func:`plan_import` validates every
row and works out what would change without writing anything, then :func:`apply_import`
writes the plan in one transaction, all or nothing.

**The file is the source of truth.** A row names the whole policy: a field left out of a row
takes the model's default (``methods`` blank, ``algorithm`` sliding_counter, ``key``
user_or_ip, ``mode`` enforce, ``counts`` all, ``fail_open`` and ``enabled`` true,
``calendar`` and ``time_zone`` blank: a rolling window, ``lockout`` 0: none,
``ipv6_prefix`` null: the ``IPV6_PREFIX`` setting), for a new policy and for an existing one
alike. Leaving ``mode`` out of the row of a policy stored in
shadow mode therefore switches it back to enforce; it does not keep the stored value, and a
row without ``calendar`` (a file written before calendars existed) makes the policy's window
rolling again. Only ``name``, ``endpoint``, ``limit`` and ``window`` are required, and
``window`` not with a ``calendar`` period, which sets it (the period's nominal length).

Rows are checked strictly before the model sees them (no unknown fields, ``limit``,
``window``, ``lockout`` and ``ipv6_prefix`` (16 to 128, or null) are integers and not
booleans, ``fail_open`` and ``enabled`` are booleans, the other fields are strings), then
with the model's own ``full_clean()``: the normalisation of ``Policy.normalize()``, the
field validators and the database check constraints. Every problem of every row is
collected and reported in one :class:`PolicyFileError`.

**Overrides.** Each exported row has ``overrides``: the policy's overrides (see
:class:`~ratelimits.models.PolicyOverride`), one mapping each, naming the client by
``user`` (username), ``group`` (name) or ``identity`` (the stored form: ``ip:...`` or
``h:<32 hex>``, a hashed API key; never the key itself, which is not stored), with
``limit`` or ``exempt: true`` and ``comment`` when there is one; sorted users, groups,
identities, each by name. On import a row's ``overrides`` list replaces that policy's
overrides: missing ones are deleted, new ones created, changed ones updated, the others
left alone. A row without the key leaves the policy's overrides as they are (files
written before overrides existed). Users and groups are found by username and name; an
identity is normalised as the admin does (an API key typed in a file is hashed); every
override is checked with the model's ``full_clean()`` before anything is written.

YAML needs PyYAML and is read with ``yaml.safe_load`` only, so tags such as
``!!python/object`` are refused, never executed. JSON needs nothing beyond the standard
library. Duplicate keys inside a JSON object are refused; PyYAML's ``safe_load`` keeps the
last of duplicate keys in a YAML mapping without a word.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import transaction
from django.db.models import Prefetch, prefetch_related_objects

from ratelimits.engine import override_identity
from ratelimits.exceptions import MissingExtra
from ratelimits.models import Policy, PolicyOverride

FORMATS = ("json", "yaml")
FIELDS: tuple[str, ...] = (
    "name",
    "endpoint",
    "methods",
    "algorithm",
    "limit",
    "window",
    "key",
    "mode",
    "fail_open",
    "enabled",
    "shards",
    "burst",
    "cost",
    "counts",
    "calendar",
    "time_zone",
    "lockout",
    "ipv6_prefix",
)
REQUIRED_FIELDS: tuple[str, ...] = ("name", "endpoint", "limit", "window")
#: A required field a row may leave out when it has another: a calendar period's window.
_SET_BY = {"window": "calendar"}
#: A row's list of overrides (optional on import: without it, overrides are left alone).
OVERRIDES = "overrides"
#: Who an override names: exactly one of these in each override of a file.
OVERRIDE_TARGETS: tuple[str, ...] = ("user", "group", "identity")
OVERRIDE_FIELDS: tuple[str, ...] = (*OVERRIDE_TARGETS, "limit", "exempt", "comment")
#: The override fields an import compares and writes (the target is how rows are matched).
_OVERRIDE_VALUES: tuple[str, ...] = ("limit", "exempt", "comment")
VERSION = 1

_EXTENSIONS = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}
_INT_FIELDS = frozenset({"limit", "window", "shards", "burst", "cost", "lockout", "ipv6_prefix"})
_BOOL_FIELDS = frozenset({"fail_open", "enabled"})
#: Fields a file may set to null (a token bucket's burst: the limit; ipv6_prefix: the
#: IPV6_PREFIX setting).
_NULLABLE_FIELDS = frozenset({"burst", "ipv6_prefix"})
_STR_FIELDS = frozenset(FIELDS) - _INT_FIELDS - _BOOL_FIELDS


class PolicyFileError(Exception):
    """A policy file that cannot be used; ``str(e)`` is one line per problem, naming the place.

    The problems are also available as a list in :attr:`problems`.
    """

    def __init__(self, problems: str | Iterable[str]) -> None:
        problems = [problems] if isinstance(problems, str) else list(problems)
        self.problems: list[str] = [" ".join(problem.splitlines()) for problem in problems]
        super().__init__("\n".join(self.problems))


def _check_format(fmt: str) -> str:
    normal = fmt.lower() if isinstance(fmt, str) else fmt
    if normal not in FORMATS:
        raise PolicyFileError(f"Unknown format {fmt!r}: use one of {', '.join(FORMATS)}.")
    return normal


def detect_format(path: str | os.PathLike[str] | None, explicit: str | None = None) -> str:
    """The format of a policy file: ``explicit`` if given, else from the extension of ``path``.

    ``None`` or ``"-"`` (standard input or output) is JSON.
    """
    if explicit is not None:
        return _check_format(explicit)
    if path is None:
        return "json"
    path = os.fspath(path)
    if path == "-":
        return "json"
    extension = os.path.splitext(path)[1].lower()
    try:
        return _EXTENSIONS[extension]
    except KeyError:
        raise PolicyFileError(
            f"{path}: cannot tell the format from the file name; pass --format json|yaml."
        ) from None


def _yaml() -> ModuleType:
    try:
        import yaml
    except ImportError:
        missing = MissingExtra("YAML policy files", "PyYAML", "yaml")
        raise PolicyFileError(f"{missing} (JSON files need nothing).") from None
    return yaml


def _row(policy: Policy) -> dict[str, Any]:
    return {name: getattr(policy, name) for name in FIELDS}


def override_row(override: PolicyOverride) -> dict[str, Any]:
    """An override as a file holds it: its client, then ``limit`` or ``exempt``, then a
    ``comment`` if it has one."""
    row: dict[str, Any]
    if override.user_id is not None:
        row = {"user": override.user.get_username()}
    elif override.group_id is not None:
        row = {"group": override.group.name}
    else:
        row = {"identity": override.identity}
    if override.exempt:
        row["exempt"] = True
    else:
        row["limit"] = override.limit
    if override.comment:
        row["comment"] = override.comment
    return row


def _override_order(row: dict[str, Any]) -> tuple[int, str]:
    kind = next(index for index, name in enumerate(OVERRIDE_TARGETS) if name in row)
    return kind, row[OVERRIDE_TARGETS[kind]]


def dump_policies(policies: Iterable[Policy], fmt: str) -> str:
    """The text of a policy file holding ``policies`` (sorted by name) in ``fmt``, each
    with its overrides (read in one query, none when they are already prefetched)."""
    fmt = _check_format(fmt)
    ordered = sorted(policies, key=lambda policy: policy.name)
    overrides = PolicyOverride.objects.select_related("user", "group")
    prefetch_related_objects(ordered, Prefetch(OVERRIDES, queryset=overrides))
    rows = [
        {
            **_row(policy),
            OVERRIDES: sorted(
                (override_row(override) for override in policy.overrides.all()),
                key=_override_order,
            ),
        }
        for policy in ordered
    ]
    document = {"version": VERSION, "policies": rows}
    if fmt == "json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return _yaml().safe_dump(document, sort_keys=False, allow_unicode=True)


def _describe(value: Any) -> str:
    """``value`` as a file author would name it: ``a boolean (true)``, ``a list``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__} ({value!r})"


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in pairs:
        if name in result:
            raise ValueError(f"duplicate key {name!r} in an object")
        result[name] = value
    return result


def _load(text: str, fmt: str, source: str) -> Any:
    if fmt == "json":
        try:
            return json.loads(text, object_pairs_hook=_reject_duplicate_keys)
        except json.JSONDecodeError as e:
            raise PolicyFileError(
                f"{source}: line {e.lineno}, column {e.colno}: invalid JSON: {e.msg}."
            ) from None
        except ValueError as e:
            raise PolicyFileError(f"{source}: invalid JSON: {e}.") from None
        except RecursionError:
            raise PolicyFileError(f"{source}: invalid JSON: nested too deeply.") from None
    yaml = _yaml()
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = e.problem or " ".join(str(e).split())
        if e.context and e.problem:
            problem = f"{problem} ({e.context})"
        raise PolicyFileError(f"{source}: {where}invalid YAML: {problem}.") from None
    except yaml.YAMLError as e:
        message = " ".join(str(e).split())
        raise PolicyFileError(f"{source}: invalid YAML: {message}") from None
    except RecursionError:
        raise PolicyFileError(f"{source}: invalid YAML: nested too deeply.") from None


def parse_document(text: str, fmt: str, source: str) -> list[dict[str, Any]]:
    """The rows of the policy file ``text`` in ``fmt``; ``source`` names it in error messages."""
    fmt = _check_format(fmt)
    text = text.removeprefix("\ufeff")  # a byte order mark left by some editors
    if not text.strip():
        raise PolicyFileError(f"{source}: the file is empty; it holds no policy document.")
    document = _load(text, fmt, source)
    if document is None and fmt == "yaml":  # comments only
        raise PolicyFileError(f"{source}: the file is empty; it holds no policy document.")
    if isinstance(document, dict):
        problems = []
        unknown = [key for key in document if key not in ("version", "policies")]
        if unknown:
            problems.append(
                f"{source}: unknown top-level key(s) {', '.join(map(repr, unknown))}; "
                "expected version and policies."
            )
        if "version" in document:
            version = document["version"]
            if type(version) is not int or version != VERSION:
                problems.append(
                    f"{source}: unsupported version {_describe(version)}; "
                    f"this release reads version {VERSION}."
                )
        if "policies" not in document:
            problems.append(f"{source}: the key 'policies' (a list of policies) is missing.")
        if problems:
            raise PolicyFileError(problems)
        rows = document["policies"]
        if not isinstance(rows, list):
            raise PolicyFileError(
                f"{source}: 'policies' must be a list of policies, not {_describe(rows)}."
            )
    elif isinstance(document, list):
        rows = document
    else:
        raise PolicyFileError(
            f"{source}: expected a mapping with 'version' and 'policies' or a list of "
            f"policies, not {_describe(document)}."
        )
    problems = [
        f"{source}: row {number}: expected a mapping of field names to values, "
        f"not {_describe(row)}."
        for number, row in enumerate(rows, start=1)
        if not isinstance(row, dict)
    ]
    if problems:
        raise PolicyFileError(problems)
    return rows


@dataclass
class OverridePlan:
    """What an import would do to one policy's overrides."""

    created: list[PolicyOverride] = field(default_factory=list)
    updated: list[tuple[PolicyOverride, list[str]]] = field(default_factory=list)
    unchanged: list[PolicyOverride] = field(default_factory=list)
    deleted: list[PolicyOverride] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return bool(self.created or self.updated or self.deleted)

    def summary(self) -> str:
        """``"2 created, 1 deleted"``: the counts that are not zero."""
        counts = (("created", self.created), ("updated", self.updated), ("deleted", self.deleted))
        return ", ".join(f"{len(found)} {verb}" for verb, found in counts if found)


@dataclass
class ImportPlan:
    """What an import would do; nothing is written until :func:`apply_import`."""

    created: list[Policy] = field(default_factory=list)
    updated: list[tuple[Policy, list[str]]] = field(default_factory=list)
    unchanged: list[Policy] = field(default_factory=list)
    pruned: list[Policy] = field(default_factory=list)
    #: By policy name: the overrides of each row that has ``overrides``, and of each pruned
    #: policy that has some (all deleted).
    overrides: dict[str, OverridePlan] = field(default_factory=dict)

    @property
    def changes(self) -> bool:
        """Whether applying the plan would write anything."""
        return bool(self.created or self.updated or self.pruned) or any(
            found.changes for found in self.overrides.values()
        )

    def override_changes(self, policy: Policy) -> OverridePlan | None:
        """The changes to ``policy``'s overrides, ``None`` when there are none."""
        found = self.overrides.get(policy.name)
        return found if found is not None and found.changes else None

    def touched_by_overrides(self) -> list[Policy]:
        """The unchanged policies whose overrides change: reports count them as updated."""
        return [policy for policy in self.unchanged if self.override_changes(policy)]

    def override_counts(self) -> tuple[int, int, int]:
        """Overrides created, updated and deleted, over every policy."""
        plans = self.overrides.values()
        return (
            sum(len(found.created) for found in plans),
            sum(len(found.updated) for found in plans),
            sum(len(found.deleted) for found in plans),
        )


def _type_problem(name: str, value: Any) -> str | None:
    if value is None and name in _NULLABLE_FIELDS:
        return None
    if name in _INT_FIELDS:
        if type(value) is not int:
            return f"must be an integer, not {_describe(value)}."
    elif name in _BOOL_FIELDS:
        if not isinstance(value, bool):
            return f"must be true or false, not {_describe(value)}."
    elif not isinstance(value, str):
        return f"must be a string, not {_describe(value)}."
    return None


def _validation_lines(error: ValidationError) -> list[str]:
    lines = []
    for name, messages in error.message_dict.items():
        for message in messages:
            lines.append(message if name == NON_FIELD_ERRORS else f"{name}: {message}")
    return lines


def plan_import(rows: list[dict[str, Any]], *, prune: bool = False) -> ImportPlan:
    """Match ``rows`` to the stored policies by name and validate them all; writes nothing.

    Raises :class:`PolicyFileError` listing every problem of every row. A field missing
    from a row takes the model's default, also for an existing policy (see the module
    docstring). With ``prune``, stored policies missing from ``rows`` are to be deleted.
    """
    existing = {policy.name: policy for policy in Policy.objects.all()}
    defaults = {name: Policy._meta.get_field(name).get_default() for name in FIELDS}
    stored_overrides: dict[int, list[PolicyOverride]] = {}
    if prune or any(isinstance(row, dict) and OVERRIDES in row for row in rows):
        for override in PolicyOverride.objects.select_related("user", "group").order_by("pk"):
            stored_overrides.setdefault(override.policy_id, []).append(override)
    targets = _Targets.named_in(rows)
    plan = ImportPlan()
    problems: list[str] = []
    first_row: dict[str, int] = {}

    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            problems.append(
                f"row {number}: expected a mapping of field names to values, not {_describe(row)}."
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
            if row.get(_SET_BY.get(required, "")):  # a calendar period: the model sets it
                bad.add(required)  # not validated: the calendar's own check says enough
            else:
                needed = f" (or give a {_SET_BY[required]})" if required in _SET_BY else ""
                row_problems.append(f"{required}: this field is required{needed}.")
                bad.add(required)
        values: dict[str, Any] = {}
        for fname in FIELDS:
            if fname not in row:
                if fname not in REQUIRED_FIELDS:
                    values[fname] = defaults[fname]
                continue
            problem = _type_problem(fname, row[fname])
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
            before = _row(stored)
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
            row_problems.extend(_validation_lines(e))

        overrides = None
        if OVERRIDES in row:
            stored_list = stored_overrides.get(stored.pk, []) if stored is not None else []
            overrides, found = _plan_overrides(row[OVERRIDES], policy, stored_list, targets)
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


@dataclass
class _Targets:
    """The users and groups a file's overrides name, read in one query each."""

    users: dict[str, Any]
    groups: dict[str, Group]

    @classmethod
    def named_in(cls, rows: list[Any]) -> _Targets:
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


def _plan_overrides(
    entries: Any, policy: Policy, stored: list[PolicyOverride], targets: _Targets
) -> tuple[OverridePlan | None, list[str]]:
    """Match a row's ``overrides`` to ``policy``'s stored ones by the client they name and
    validate each; returns the plan and the problems (``override N: field: message``)."""
    if not isinstance(entries, list):
        return None, [f"{OVERRIDES}: must be a list of overrides, not {_describe(entries)}."]
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
            before = {name: getattr(override, name) for name in _OVERRIDE_VALUES}
            for name in _OVERRIDE_VALUES:
                setattr(override, name, values[name])
        override.policy = policy  # as the file has it: its key normalises the identity
        try:
            # A new policy has no pk yet; the file's own duplicates are refused above.
            override.full_clean(exclude=["policy"] if policy.pk is None else None)
        except ValidationError as e:
            problems.extend(f"{where}: {line}" for line in _validation_lines(e))
            continue
        if before is None:
            plan.created.append(override)
            continue
        changed = [name for name in _OVERRIDE_VALUES if getattr(override, name) != before[name]]
        if changed:
            plan.updated.append((override, changed))
        else:
            plan.unchanged.append(override)
    plan.deleted = list(remaining.values())
    return plan, problems


def _read_override(
    entry: Any, policy: Policy, targets: _Targets
) -> tuple[tuple[str, Any], str, dict[str, Any]]:
    """``(target, how to name it, model field values)`` of one override of a file;
    :class:`PolicyFileError` with every problem found."""
    if not isinstance(entry, dict):
        raise PolicyFileError(
            f"expected a mapping of field names to values, not {_describe(entry)}."
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
        problems.append(f"limit: must be an integer, not {_describe(values['limit'])}.")
    if not isinstance(values["exempt"], bool):
        problems.append(f"exempt: must be true or false, not {_describe(values['exempt'])}.")
    if not isinstance(values["comment"], str):
        problems.append(f"comment: must be a string, not {_describe(values['comment'])}.")

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
        problems.append(f"{named[0]}: must be a name, not {_describe(entry[named[0]])}.")
    else:
        kind, text = named[0], entry[named[0]]
        if kind == "user":
            user = targets.users.get(text)
            if user is None:
                problems.append(f"user: there is no user {text!r}.")
            else:
                target, shown, values["user"] = ("user", user.pk), repr(text), user
        elif kind == "group":
            group = targets.groups.get(text)
            if group is None:
                problems.append(f"group: there is no group {text!r}.")
            else:
                target, shown, values["group"] = ("group", group.pk), repr(text), group
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


def apply_import(plan: ImportPlan) -> None:
    """Write ``plan`` in one transaction: all of it, or nothing if anything fails."""
    with transaction.atomic():
        for policy in plan.created:
            policy.save()
        for policy, changed in plan.updated:
            policy.save(update_fields=[*changed, "updated_at"])
        for found in plan.overrides.values():
            for override in found.deleted:
                override.delete()
            for override, changed in found.updated:
                override.save(update_fields=[*changed, "updated_at"])
            for override in found.created:
                override.save()
        for policy in plan.pruned:
            policy.delete()
