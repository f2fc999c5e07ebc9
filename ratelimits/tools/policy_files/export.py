"""Writing a policy file: the policies, each with its overrides, as JSON or YAML."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Prefetch, prefetch_related_objects

from ratelimits.models import Policy, PolicyOverride
from ratelimits.tools.policy_files.formats import check_format, dump_text
from ratelimits.tools.policy_files.schema import (
    OVERRIDE_TARGETS,
    OVERRIDES,
    VERSION,
    override_row,
    policy_row,
)


def _override_order(row: dict[str, Any]) -> tuple[int, str]:
    kind = next(index for index, name in enumerate(OVERRIDE_TARGETS) if name in row)
    return kind, row[OVERRIDE_TARGETS[kind]]


def dump_rows(rows: list[dict[str, Any]], fmt: str) -> str:
    """The text of a policy file holding ``rows`` (policy-file rows, as an import reads
    them) in ``fmt``."""
    return dump_text({"version": VERSION, "policies": rows}, check_format(fmt))


def dump_policies(policies: Iterable[Policy], fmt: str) -> str:
    """The text of a policy file holding ``policies`` (sorted by name) in ``fmt``, each
    with its overrides (read in one query, none when they are already prefetched)."""
    fmt = check_format(fmt)
    ordered = sorted(policies, key=lambda policy: policy.name)
    overrides = PolicyOverride.objects.select_related("user", "group")
    prefetch_related_objects(ordered, Prefetch(OVERRIDES, queryset=overrides))
    rows = [
        {
            **policy_row(policy),
            OVERRIDES: sorted(
                (override_row(override) for override in policy.overrides.all()),
                key=_override_order,
            ),
        }
        for policy in ordered
    ]
    return dump_text({"version": VERSION, "policies": rows}, fmt)
