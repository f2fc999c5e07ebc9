"""The import plan: what would be created, updated, left alone and pruned, compared
after normalisation, with nothing written."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

import pytest

from ratelimits.models import Policy
from ratelimits.tools.policy_files import (
    FIELDS,
    ImportPlan,
    apply_import,
    parse_document,
    plan_import,
)
from tests.helpers import problems_of

if TYPE_CHECKING:
    from tests.tools.policy_files.conftest import RowFactory, Snapshot

pytestmark = pytest.mark.django_db


def test_create_update_unchanged_and_prune() -> None:
    Policy.objects.create(name="same", endpoint="api:same", limit=5, window=60)
    Policy.objects.create(name="edit", endpoint="api:edit", limit=5, window=60)
    Policy.objects.create(name="gone", endpoint="api:gone", limit=5, window=60)
    rows = [
        {"name": "same", "endpoint": "api:same", "limit": 5, "window": 60},
        {"name": "edit", "endpoint": "api:edit", "limit": 50, "window": 60, "mode": "shadow"},
        {"name": "new", "endpoint": "/new/*", "limit": 1, "window": 1},
    ]

    plan = plan_import(rows)
    assert [p.name for p in plan.created] == ["new"]
    assert plan.created[0].pk is None
    assert [(p.name, changed) for p, changed in plan.updated] == [("edit", ["limit", "mode"])]
    assert [p.name for p in plan.unchanged] == ["same"]
    assert plan.pruned == []  # only with prune=True
    assert plan.changes

    plan = plan_import(rows, prune=True)
    assert [p.name for p in plan.pruned] == ["gone"]
    assert all(p.pk is not None for p in plan.pruned)

    apply_import(plan)
    assert sorted(Policy.objects.values_list("name", "limit", "mode")) == [
        ("edit", 50, "shadow"),
        ("new", 1, "enforce"),
        ("same", 5, "enforce"),
    ]
    assert not plan_import(rows, prune=True).changes


def test_changed_fields_are_listed_in_field_order(row: RowFactory) -> None:
    Policy.objects.create(name="login", endpoint="api:login", limit=5, window=60)
    new = row(
        enabled=False,
        key="ip",
        window=120,
        methods="post",
        endpoint="/login/",
        algorithm="fixed_window",
        fail_open=False,
    )
    ((policy, changed),) = plan_import([new]).updated
    assert changed == [
        "endpoint",
        "methods",
        "algorithm",
        "window",
        "key",
        "fail_open",
        "enabled",
    ]
    assert policy.methods == "POST"


def test_missing_optional_fields_take_the_model_defaults_on_update(row: RowFactory) -> None:
    """The file is the source of truth: a field left out is the default, not the stored value."""
    Policy.objects.create(
        name="login",
        endpoint="api:login",
        methods="POST",
        algorithm="sliding_log",
        limit=5,
        window=60,
        key="ip",
        mode="shadow",
        fail_open=False,
        enabled=False,
    )
    ((policy, changed),) = plan_import([row()]).updated
    assert changed == ["methods", "algorithm", "key", "mode", "fail_open", "enabled"]
    assert (policy.methods, policy.algorithm, policy.key, policy.mode) == (
        "",
        "sliding_counter",
        "user_or_ip",
        "enforce",
    )
    assert (policy.fail_open, policy.enabled) == (True, True)


def test_missing_optional_fields_take_the_model_defaults_on_create(row: RowFactory) -> None:
    (policy,) = plan_import([row()]).created
    defaults = Policy(**row())
    assert {f: getattr(policy, f) for f in FIELDS} == {f: getattr(defaults, f) for f in FIELDS}


def test_comparison_is_made_after_normalisation(row: RowFactory) -> None:
    Policy.objects.create(
        name="login", endpoint="api:login", methods="GET,POST", limit=5, window=60
    )
    plan = plan_import([row(methods="post, get", endpoint="  api:login ")])
    assert [p.name for p in plan.unchanged] == ["login"]
    assert plan.updated == []

    plan = plan_import([row(methods="post, get, delete")])
    assert [(p.methods, changed) for p, changed in plan.updated] == [
        ("GET,POST,DELETE", ["methods"])
    ]


def test_new_rows_are_normalised(row: RowFactory) -> None:
    (policy,) = plan_import([row(methods=" delete,get ", endpoint=" /x/ ")]).created
    assert (policy.methods, policy.endpoint) == ("GET,DELETE", "/x/")


def test_timestamps_do_not_count_as_changes(row: RowFactory) -> None:
    policy = Policy.objects.create(**row())
    long_ago = datetime.datetime(2001, 1, 1, tzinfo=datetime.UTC)
    Policy.objects.filter(pk=policy.pk).update(created_at=long_ago, updated_at=long_ago)
    plan = plan_import([row()])
    assert [p.name for p in plan.unchanged] == ["login"]
    assert not plan.changes


@pytest.mark.parametrize("name", ["created_at", "updated_at", "id"])
def test_timestamps_and_id_cannot_be_imported(name: str, row: RowFactory) -> None:
    value = 1 if name == "id" else "2001-01-01T00:00:00Z"
    (line,) = problems_of([row(**{name: value})])
    assert line.startswith(f"row 1 (login): unknown field(s) '{name}'")


def test_apply_saves_updates_with_a_new_updated_at_and_the_same_created_at(row: RowFactory) -> None:
    policy = Policy.objects.create(**row())
    long_ago = datetime.datetime(2001, 1, 1, tzinfo=datetime.UTC)
    Policy.objects.filter(pk=policy.pk).update(created_at=long_ago, updated_at=long_ago)
    apply_import(plan_import([row(limit=6)]))
    policy.refresh_from_db()
    assert policy.limit == 6
    assert policy.created_at == long_ago
    assert policy.updated_at > long_ago


def test_an_empty_list_with_prune_deletes_everything(row: RowFactory) -> None:
    Policy.objects.create(**row())
    plan = plan_import(parse_document('{"version": 1, "policies": []}', "json", "p"), prune=True)
    assert [p.name for p in plan.pruned] == ["login"]
    apply_import(plan)
    assert not Policy.objects.exists()


def test_plan_changes_property(row: RowFactory) -> None:
    stored = Policy(**row())
    assert not ImportPlan([], [], [], []).changes
    assert not ImportPlan([], [], [stored], []).changes
    assert ImportPlan([stored], [], [], []).changes
    assert ImportPlan([], [(stored, ["limit"])], [], []).changes
    assert ImportPlan([], [], [], [stored]).changes


def test_plan_import_never_writes(snapshot: Snapshot) -> None:
    Policy.objects.create(name="same", endpoint="api:same", limit=5, window=60)
    Policy.objects.create(name="edit", endpoint="api:edit", limit=5, window=60)
    Policy.objects.create(name="gone", endpoint="api:gone", limit=5, window=60)
    long_ago = datetime.datetime(2001, 1, 1, tzinfo=datetime.UTC)
    Policy.objects.update(updated_at=long_ago)
    before = snapshot()

    plan = plan_import(
        [
            {"name": "same", "endpoint": "api:same", "limit": 5, "window": 60},
            {"name": "edit", "endpoint": "api:edit", "limit": 50, "window": 60},
            {"name": "new", "endpoint": "/new/*", "limit": 1, "window": 1},
        ],
        prune=True,
    )
    assert plan.created and plan.updated and plan.unchanged and plan.pruned
    assert snapshot() == before
    assert Policy.objects.count() == 3
    assert not Policy.objects.filter(name="new").exists()
    assert Policy.objects.get(name="edit").limit == 5
    assert set(Policy.objects.values_list("updated_at", flat=True)) == {long_ago}
