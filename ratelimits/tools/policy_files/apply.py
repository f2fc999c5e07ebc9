"""Applying an import plan: everything it would write, in one transaction."""

from __future__ import annotations

from django.db import transaction

from ratelimits.tools.policy_files.plans import ImportPlan


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
