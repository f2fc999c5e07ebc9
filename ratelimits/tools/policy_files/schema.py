"""What a policy file holds: the fields of a policy's row and of an override, their types,
and a stored policy or override as a row."""

from __future__ import annotations

from typing import Any

from ratelimits.models import Policy, PolicyOverride
from ratelimits.tools.policy_files.errors import describe

VERSION = 1
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
    "lockout_until_lifted",
    "extend_lockout",
    "reset_on_success",
    "ipv6_prefix",
    "traffic",
)
REQUIRED_FIELDS: tuple[str, ...] = ("name", "endpoint", "limit", "window")
#: A required field a row may leave out when it has another: a calendar period's window.
SET_BY = {"window": "calendar"}
#: A row's list of overrides (optional on import: without it, overrides are left alone).
OVERRIDES = "overrides"
#: Who an override names: exactly one of these in each override of a file.
OVERRIDE_TARGETS: tuple[str, ...] = ("user", "group", "identity")
OVERRIDE_FIELDS: tuple[str, ...] = (*OVERRIDE_TARGETS, "limit", "exempt", "comment")
#: The override fields an import compares and writes (the target is how rows are matched).
OVERRIDE_VALUES: tuple[str, ...] = ("limit", "exempt", "comment")

_INT_FIELDS = frozenset({"limit", "window", "shards", "burst", "cost", "lockout", "ipv6_prefix"})
_BOOL_FIELDS = frozenset(
    {
        "fail_open",
        "enabled",
        "lockout_until_lifted",
        "extend_lockout",
        "reset_on_success",
        "traffic",
    }
)
#: Fields a file may set to null (a token bucket's burst: the limit; ipv6_prefix: the
#: IPV6_PREFIX setting).
_NULLABLE_FIELDS = frozenset({"burst", "ipv6_prefix"})


def type_problem(name: str, value: Any) -> str | None:
    """What is wrong with the type of ``value`` for the field ``name``; ``None`` if nothing."""
    if value is None and name in _NULLABLE_FIELDS:
        return None
    if name in _INT_FIELDS:
        if type(value) is not int:
            return f"must be an integer, not {describe(value)}."
    elif name in _BOOL_FIELDS:
        if not isinstance(value, bool):
            return f"must be true or false, not {describe(value)}."
    elif not isinstance(value, str):
        return f"must be a string, not {describe(value)}."
    return None


def policy_row(policy: Policy) -> dict[str, Any]:
    """A policy's fields as a file holds them, without its overrides."""
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
