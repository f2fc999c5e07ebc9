"""Applying an import plan: all or nothing, and only the changed fields written."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from django.db import IntegrityError

from ratelimits.models import Policy
from ratelimits.tools.policy_files import ImportPlan, apply_import, plan_import

if TYPE_CHECKING:
    from tests.tools.policy_files.conftest import RowFactory, Snapshot

pytestmark = pytest.mark.django_db


def test_apply_import_is_atomic_when_a_save_breaks_a_constraint(snapshot: Snapshot) -> None:
    Policy.objects.create(name="first", endpoint="api:first", limit=5, window=60)
    Policy.objects.create(name="second", endpoint="api:second", limit=5, window=60)
    Policy.objects.create(name="gone", endpoint="api:gone", limit=5, window=60)
    before = snapshot()

    first, second, gone = (Policy.objects.get(name=n) for n in ("first", "second", "gone"))
    first.limit = 50
    second.window = 0  # not validated: the database constraint refuses it
    plan = ImportPlan(
        created=[Policy(name="new", endpoint="/new/*", limit=1, window=1)],
        updated=[(first, ["limit"]), (second, ["window"])],
        unchanged=[],
        pruned=[gone],
    )
    with pytest.raises(IntegrityError):
        apply_import(plan)
    assert snapshot() == before
    assert not Policy.objects.filter(name="new").exists()


def test_apply_import_is_atomic_when_the_last_step_fails(snapshot: Snapshot) -> None:
    Policy.objects.create(name="first", endpoint="api:first", limit=5, window=60)
    Policy.objects.create(name="gone", endpoint="api:gone", limit=5, window=60)
    before = snapshot()

    first = Policy.objects.get(name="first")
    first.limit = 50
    plan = ImportPlan(
        created=[Policy(name="new", endpoint="/new/*", limit=1, window=1)],
        updated=[(first, ["limit"])],
        unchanged=[],
        # The stored one is deleted first, then the unsaved one cannot be.
        pruned=[Policy.objects.get(name="gone"), Policy(name="ghost")],
    )
    with pytest.raises(ValueError, match="id attribute is set to None"):
        apply_import(plan)
    assert snapshot() == before


def test_apply_import_is_atomic_when_a_create_collides(snapshot: Snapshot) -> None:
    Policy.objects.create(name="taken", endpoint="api:taken", limit=5, window=60)
    before = snapshot()
    plan = ImportPlan(
        created=[
            Policy(name="new", endpoint="/new/*", limit=1, window=1),
            Policy(name="taken", endpoint="/x/", limit=1, window=1),
        ],
        updated=[],
        unchanged=[],
        pruned=[],
    )
    with pytest.raises(IntegrityError):
        apply_import(plan)
    assert snapshot() == before


def test_apply_import_writes_only_the_changed_fields(row: RowFactory) -> None:
    """``update_fields``: a concurrent edit of another field of the same policy survives."""
    Policy.objects.create(**row())
    ((policy, changed),) = plan_import([row(limit=6)]).updated
    assert changed == ["limit"]
    Policy.objects.filter(name="login").update(window=120)  # someone else, meanwhile
    apply_import(ImportPlan([], [(policy, changed)], [], []))
    assert Policy.objects.values_list("limit", "window").get(name="login") == (6, 120)
