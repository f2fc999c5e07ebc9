"""A policy change is announced once per transaction that commits it, however many rows it
writes: a bulk delete (from the admin too), an import, a queryset ``update()``.

Each announcement moves the version stamp every worker watches and sends
``policy_changed``; these tests count the signal. The transactions really commit.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import transaction

from ratelimits.models import Policy, PolicyOverride
from ratelimits.signals import policy_changed
from ratelimits.tools.policy_files import apply_import, plan_import
from tests.helpers import make_policy

pytestmark = pytest.mark.django_db(transaction=True)

MANY = 40


@pytest.fixture
def announced() -> Iterator[list[object]]:
    """The announcements made during the test (one entry each)."""
    sent: list[object] = []

    def receiver(sender: object, **kwargs: object) -> None:
        sent.append(sender)

    policy_changed.connect(receiver, weak=False, dispatch_uid="tests.announced")
    yield sent
    policy_changed.disconnect(dispatch_uid="tests.announced")


@pytest.fixture
def many(alice) -> list[Policy]:
    """:data:`MANY` policies, each with an override (a delete cascades to it)."""
    policies = [make_policy(f"p{i:02d}") for i in range(MANY)]
    for policy in policies:
        PolicyOverride.objects.create(policy=policy, user=alice, limit=50)
    return policies


def test_a_bulk_delete_of_many_policies_announces_once(many, announced):
    announced.clear()
    deleted, _ = Policy.objects.filter(name__startswith="p").delete()
    assert deleted == 2 * MANY  # the policies and their overrides, one post_delete each
    assert len(announced) == 1


def test_the_admins_bulk_delete_announces_once(many, announced, admin_client):
    announced.clear()
    response = admin_client.post(
        "/admin/ratelimits/policy/",
        {"action": "delete_selected", "_selected_action": [p.pk for p in many], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Policy.objects.exists()
    assert len(announced) == 1


def test_an_import_announces_once(many, announced):
    rows = [
        {"name": f"new{i:02d}", "endpoint": f"api:new{i}", "limit": 5, "window": 60}
        for i in range(MANY)
    ]
    rows += [
        {"name": p.name, "endpoint": p.endpoint, "limit": 7, "window": 60, "overrides": []}
        for p in many[: MANY // 2]
    ]
    plan = plan_import(rows, prune=True)
    assert (len(plan.created), len(plan.updated), len(plan.pruned)) == (MANY, MANY // 2, MANY // 2)
    announced.clear()
    apply_import(plan)
    assert Policy.objects.count() == MANY + MANY // 2
    assert len(announced) == 1


def test_a_queryset_update_and_a_bulk_create_announce_once_each(many, announced):
    announced.clear()
    assert Policy.objects.update(limit=9) == MANY
    assert len(announced) == 1
    Policy.objects.bulk_create(
        Policy(name=f"b{i:02d}", endpoint=f"api:b{i}", limit=5, window=60) for i in range(MANY)
    )
    assert len(announced) == 2


def test_rows_written_in_one_transaction_announce_once_after_the_commit(announced):
    with transaction.atomic():
        for i in range(MANY):
            make_policy(f"p{i:02d}")
        assert announced == []  # nothing before the commit
    assert len(announced) == 1


def test_separate_commits_announce_each(announced):
    """Outside a transaction every save is its own commit."""
    make_policy("a")
    make_policy("b")
    assert len(announced) == 2


class Rollback(Exception):
    pass


def test_a_change_whose_savepoint_rolled_back_leaves_the_next_change_announced(announced):
    """The announcement scheduled inside a savepoint goes with it when it rolls back; a
    change after it, in the same transaction, is still announced (once)."""
    with transaction.atomic():
        with pytest.raises(Rollback), transaction.atomic():
            make_policy("gone")
            make_policy("gone-too")
            raise Rollback
        make_policy("kept")
        make_policy("kept-too")
    assert sorted(Policy.objects.values_list("name", flat=True)) == ["kept", "kept-too"]
    assert len(announced) == 1


def test_a_change_before_a_savepoint_rolled_back_is_announced_once(announced):
    with transaction.atomic():
        make_policy("kept")
        with pytest.raises(Rollback), transaction.atomic():
            make_policy("gone")
            raise Rollback
    assert list(Policy.objects.values_list("name", flat=True)) == ["kept"]
    assert len(announced) == 1


def test_a_rolled_back_transaction_announces_nothing(announced):
    with pytest.raises(Rollback), transaction.atomic():
        make_policy("gone")
        raise Rollback
    assert announced == []


@pytest.mark.django_db
def test_each_block_whose_callbacks_a_test_runs_is_announced(
    announced, django_capture_on_commit_callbacks
):
    """In a test's transaction (never committed), a block whose commit callbacks the test
    runs announces its own changes, even after changes outside it scheduled one."""
    make_policy("a")  # schedules an announcement this test never runs
    with django_capture_on_commit_callbacks(execute=True):
        make_policy("b")
        make_policy("c")
    assert len(announced) == 1
    with django_capture_on_commit_callbacks(execute=True):
        Policy.objects.filter(name="b").delete()
    assert len(announced) == 2
