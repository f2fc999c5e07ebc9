"""What an import would do: the policies and overrides it would create, update, leave alone
and delete, worked out before anything is written."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ratelimits.models import Policy, PolicyOverride


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
    """What an import would do; nothing is written until
    :func:`~ratelimits.tools.policy_files.apply_import`."""

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


def file_under(
    plan: OverridePlan | ImportPlan,
    row: Any,
    before: dict[str, Any] | None,
    fields: Iterable[str],
) -> None:
    """``row`` in ``plan`` as created (nothing ``before``), updated (with the ``fields``
    whose values change) or unchanged."""
    if before is None:
        plan.created.append(row)
        return
    changed = [name for name in fields if getattr(row, name) != before[name]]
    if changed:
        plan.updated.append((row, changed))
    else:
        plan.unchanged.append(row)
