"""Policy files carry calendar quotas and lockouts: out and back unchanged, defaults for a
file written before they existed, and a bad value named with its row and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from django.core.management.base import CommandError

from ratelimits.models import Policy
from ratelimits.tools.policy_files import (
    FIELDS,
    FORMATS,
    apply_import,
    dump_policies,
    parse_document,
    plan_import,
)
from tests.helpers import problems_of, run

if TYPE_CHECKING:
    from tests.tools.policy_files.conftest import RowFactory

pytestmark = pytest.mark.django_db


def stored() -> list[tuple[Any, ...]]:
    return list(Policy.objects.order_by("name").values_list(*FIELDS))


@pytest.fixture
def quotas() -> None:
    Policy.objects.create(
        name="quota", endpoint="api:search", algorithm="fixed_window", limit=10_000,
        calendar="month", time_zone="Europe/Berlin",
    )  # fmt: skip
    Policy.objects.create(
        name="daily", endpoint="api:items", algorithm="fixed_window", limit=500, calendar="day"
    )
    Policy.objects.create(
        name="login", endpoint="api:login", algorithm="sliding_log", limit=5, window=60,
        lockout=900,
    )  # fmt: skip


@pytest.mark.parametrize("fmt", FORMATS)
def test_calendars_and_lockouts_go_out_and_back(fmt: str, quotas: None) -> None:
    before = stored()
    text = dump_policies(Policy.objects.all(), fmt)
    document = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    rows = {r["name"]: r for r in document["policies"]}
    assert {k: rows["quota"][k] for k in ("calendar", "time_zone", "lockout", "window")} == {
        "calendar": "month",
        "time_zone": "Europe/Berlin",
        "lockout": 0,
        "window": 2592000,
    }
    assert (rows["daily"]["calendar"], rows["daily"]["time_zone"]) == ("day", "")
    assert (rows["login"]["calendar"], rows["login"]["lockout"]) == ("", 900)

    Policy.objects.all().delete()
    apply_import(plan_import(parse_document(text, fmt, "backup")))
    assert stored() == before
    assert dump_policies(Policy.objects.all(), fmt) == text
    plan = plan_import(parse_document(text, fmt, "backup"))
    assert not plan.changes  # the file and the table agree


def test_a_file_from_before_calendars_and_lockouts_takes_the_defaults(row: RowFactory) -> None:
    plan = plan_import([row(algorithm="fixed_window")])
    (created,) = plan.created
    assert (created.calendar, created.time_zone, created.lockout) == ("", "", 0)
    apply_import(plan)
    # The file is the source of truth: an old row ends a stored policy's quota and lockout.
    Policy.objects.filter(name="login").update(calendar="week", window=604800, lockout=600)
    ((policy, changed),) = plan_import([row(algorithm="fixed_window")]).updated
    assert changed == ["window", "calendar", "lockout"]
    assert (policy.calendar, policy.window, policy.lockout) == ("", 60, 0)


def test_a_calendar_row_needs_no_window_and_gets_the_periods() -> None:
    rows = [{"name": "quota", "endpoint": "q", "algorithm": "fixed_window", "limit": 9,
             "calendar": "week", "time_zone": " Asia/Tokyo "}]  # fmt: skip
    apply_import(plan_import(rows))
    quota = Policy.objects.get(name="quota")
    assert (quota.window, quota.calendar, quota.time_zone) == (604800, "week", "Asia/Tokyo")
    # A window written beside a calendar is the period's all the same (as in the admin).
    (updated,) = plan_import([{**rows[0], "calendar": "day", "window": 60}]).updated
    assert updated[1] == ["window", "calendar"] and updated[0].window == 86400


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        (
            {"algorithm": "fixed_window", "calendar": "month", "time_zone": "Mars/Olympus_Mons"},
            "time_zone: 'Mars/Olympus_Mons' is not a known time zone: use an IANA name such "
            "as Europe/Berlin, America/New_York or UTC, or leave blank for the site's "
            "TIME_ZONE.",
        ),
        (
            {"algorithm": "sliding_log", "calendar": "month"},
            "calendar: Only a fixed_window policy counts in calendar periods: choose Fixed "
            "window, or a rolling window.",
        ),
        (
            {"time_zone": "Europe/Berlin"},
            "time_zone: Only a calendar period has a time zone: choose a calendar day, week "
            "or month, or leave it blank.",
        ),
        (
            {"algorithm": "fixed_window", "calendar": "year"},
            "calendar: Value 'year' is not a valid choice.",
        ),
        ({"calendar": None}, "calendar: must be a string, not null."),
        ({"time_zone": 1}, "time_zone: must be a string, not an integer (1)."),
        ({"lockout": -60}, "lockout: Ensure this value is greater than or equal to 0."),
        ({"lockout": 2592001}, "lockout: Ensure this value is less than or equal to 2592000."),
        ({"lockout": "15 min"}, "lockout: must be an integer, not a string ('15 min')."),
        ({"lockout": True}, "lockout: must be an integer, not a boolean (true)."),
        ({"lockout": None}, "lockout: must be an integer, not null."),
        (
            {"lockout": 900, "shards": 2},
            "lockout: A lockout needs one shard: set shards to 1, or the lockout to 0.",
        ),
        (
            {"lockout": 900, "algorithm": "concurrency"},
            "lockout: A concurrency policy has no lockout: its slots come back.",
        ),
    ],
)
def test_a_bad_calendar_or_lockout_is_named_once(
    fields: dict[str, Any], problem: str, row: RowFactory
) -> None:
    """One line each, on the field: no database constraint's echo, no traceback."""
    Policy.objects.create(name="keep", endpoint="api:keep", limit=1, window=1)
    before = stored()
    assert problems_of([row(**fields), row(name="fine")], prune=True) == [
        f"row 1 (login): {problem}"
    ]
    assert stored() == before


def test_a_calendar_row_without_a_window_and_with_a_bad_calendar_says_only_that() -> None:
    bad = {"name": "quota", "endpoint": "q", "algorithm": "fixed_window", "limit": 9}
    assert problems_of([{**bad, "calendar": "fortnight"}]) == [
        "row 1 (quota): calendar: Value 'fortnight' is not a valid choice."
    ]


def test_the_command_names_a_bad_lockout_in_a_yaml_file_and_writes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text(
        "version: 1\n"
        "policies:\n"
        "- {name: quota, endpoint: api:search, algorithm: fixed_window, limit: 100,\n"
        "   calendar: month, time_zone: Europe/Berlin}\n"
        "- {name: login, endpoint: api:login, limit: 5, window: 60, lockout: 15m}\n"
    )
    with pytest.raises(CommandError) as raised:
        run("import", str(path), "--yes")
    assert str(raised.value).splitlines() == [
        f"{path} was not imported; nothing changed.",
        "row 2 (login): lockout: must be an integer, not a string ('15m').",
    ]
    assert not Policy.objects.exists()
    path.write_text(path.read_text().replace("15m", "900"))
    assert run("import", str(path), "--yes").splitlines()[-1] == (
        f"Imported {path}: 2 created, 0 updated, 0 unchanged, 0 deleted."
    )
    assert Policy.objects.get(name="quota").rate_display == (
        "100 per calendar month (Europe/Berlin)"
    )
    assert Policy.objects.get(name="login").rate_display == "5 per 60 s, then locked out 15 min"
