"""Policy files out and back: an export imported again changes nothing, JSON and YAML
alike, and a field's bad value in a file is named."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from ratelimits.models import Policy
from ratelimits.tools.policy_files import (
    FORMATS,
    PolicyFileError,
    apply_import,
    dump_policies,
    parse_document,
    plan_import,
)
from tests.helpers import problems_of

if TYPE_CHECKING:
    from tests.tools.policy_files.conftest import RowFactory, Snapshot

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("fmt", FORMATS)
def test_dump_then_plan_is_all_unchanged(fmt: str, varied: list[Policy]) -> None:
    text = dump_policies(Policy.objects.all(), fmt)
    plan = plan_import(parse_document(text, fmt, f"policies.{fmt}"), prune=True)
    assert sorted(p.name for p in plan.unchanged) == ["123", "null", "on", "search"]
    assert (plan.created, plan.updated, plan.pruned) == ([], [], [])
    assert not plan.changes


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_delete_import_export_gives_the_same_text(fmt: str, varied: list[Policy]) -> None:
    before = dump_policies(Policy.objects.all(), fmt)
    Policy.objects.all().delete()
    plan = plan_import(parse_document(before, fmt, "backup"))
    assert sorted(p.name for p in plan.created) == ["123", "null", "on", "search"]
    apply_import(plan)
    assert Policy.objects.count() == 4
    assert dump_policies(Policy.objects.all(), fmt) == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_token_buckets_burst_and_a_cost_go_out_and_back(fmt: str) -> None:
    Policy.objects.create(
        name="bucket", endpoint="api:items", algorithm="token_bucket", limit=2, window=2, burst=4
    )
    Policy.objects.create(name="heavy", endpoint="api:export", limit=100, window=60, cost=25)
    text = dump_policies(Policy.objects.all(), fmt)
    Policy.objects.all().delete()
    apply_import(plan_import(parse_document(text, fmt, "backup")))
    stored = Policy.objects.order_by("name").values_list("name", "algorithm", "burst", "cost")
    assert list(stored) == [
        ("bucket", "token_bucket", 4, 1),
        ("heavy", "sliding_counter", None, 25),
    ]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_policy_without_its_traffic_record_keeps_it_off_out_and_back(fmt: str) -> None:
    Policy.objects.create(name="quiet", endpoint="api:items", limit=5, window=60, traffic=False)
    Policy.objects.create(name="watched", endpoint="api:export", limit=5, window=60)
    text = dump_policies(Policy.objects.all(), fmt)
    Policy.objects.all().delete()
    apply_import(plan_import(parse_document(text, fmt, "backup")))
    stored = Policy.objects.order_by("name").values_list("name", "traffic")
    assert list(stored) == [("quiet", False), ("watched", True)]


def test_a_traffic_switch_that_is_not_a_boolean_is_named(row: RowFactory) -> None:
    assert problems_of([row(traffic="no")]) == [
        "row 1 (login): traffic: must be true or false, not a string ('no')."
    ]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"burst": 4}, "burst: Only a token_bucket policy has a burst"),
        ({"burst": "4"}, "burst: must be an integer, not a string ('4')"),
        ({"cost": None}, "cost: must be an integer, not null"),
        ({"cost": 0}, "cost: Ensure this value is greater than or equal to 1"),
    ],
)
def test_a_bad_burst_or_cost_in_a_file_is_named(
    fields: dict[str, Any], problem: str, row: RowFactory
) -> None:
    with pytest.raises(PolicyFileError) as raised:
        plan_import([row(**fields)])
    assert problem in str(raised.value)
    assert not Policy.objects.exists()


@pytest.mark.parametrize("fmt", FORMATS)
def test_counts_and_a_concurrency_policy_go_out_and_back(fmt: str) -> None:
    Policy.objects.create(name="login", endpoint="api:login", limit=5, window=60, counts="failures")
    Policy.objects.create(
        name="orders", endpoint="api:orders", limit=50, window=60, counts="successes"
    )
    Policy.objects.create(
        name="pool", endpoint="api:export", algorithm="concurrency", limit=2, window=30
    )
    text = dump_policies(Policy.objects.all(), fmt)
    document = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    assert [r["counts"] for r in document["policies"]] == ["failures", "successes", "all"]
    Policy.objects.all().delete()
    apply_import(plan_import(parse_document(text, fmt, "backup")))
    stored = Policy.objects.order_by("name").values_list("name", "algorithm", "counts")
    assert list(stored) == [
        ("login", "sliding_counter", "failures"),
        ("orders", "sliding_counter", "successes"),
        ("pool", "concurrency", "all"),
    ]
    assert dump_policies(Policy.objects.all(), fmt) == text


def test_a_changed_counts_is_an_update_and_a_row_without_it_counts_all(row: RowFactory) -> None:
    Policy.objects.create(**row(), counts="failures")
    (updated,) = plan_import([row(counts="successes")]).updated
    assert (updated[0].counts, updated[1]) == ("successes", ["counts"])
    # A file written before counts existed: the field takes its default, all.
    (updated,) = plan_import([row()]).updated
    assert (updated[0].counts, updated[1]) == ("all", ["counts"])


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"counts": "sometimes"}, "counts: Value 'sometimes' is not a valid choice."),
        ({"counts": None}, "counts: must be a string, not null."),
        ({"counts": True}, "counts: must be a string, not a boolean (true)."),
        (
            {"algorithm": "concurrency", "counts": "failures"},
            "counts: A concurrency policy gives every slot back when the response is done: "
            "choose all.",
        ),
    ],
)
def test_a_bad_counts_in_a_file_is_named(
    fields: dict[str, Any], problem: str, row: RowFactory, snapshot: Snapshot
) -> None:
    Policy.objects.create(name="keep", endpoint="api:keep", limit=1, window=1, counts="failures")
    before = snapshot()
    assert problems_of([row(**fields), row(name="fine")], prune=True) == [
        f"row 1 (login): {problem}"
    ]
    assert snapshot() == before


def test_json_and_yaml_files_of_the_same_policies_read_the_same(varied: list[Policy]) -> None:
    rows = {
        fmt: parse_document(dump_policies(Policy.objects.all(), fmt), fmt, "x") for fmt in FORMATS
    }
    assert rows["json"] == rows["yaml"]
