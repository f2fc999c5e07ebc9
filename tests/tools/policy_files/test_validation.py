"""What the import plan refuses: unknown, missing and mistyped fields, the model's own
validation and duplicate names, every problem of every row reported together."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import pytest

from ratelimits.models import Policy
from ratelimits.tools.policy_files import parse_document
from ratelimits.validators import MAX_WINDOW
from tests.helpers import problems_of

if TYPE_CHECKING:
    from tests.tools.policy_files.conftest import RowFactory, Snapshot

pytestmark = pytest.mark.django_db


def test_unknown_field_is_named_with_the_known_ones(row: RowFactory) -> None:
    assert problems_of([row(limt=5)]) == [
        "row 1 (login): unknown field(s) 'limt'; the fields are name, endpoint, methods, "
        "algorithm, limit, window, key, mode, fail_open, enabled, shards, burst, cost, counts, "
        "calendar, time_zone, lockout, lockout_until_lifted, extend_lockout, reset_on_success, "
        "ipv6_prefix, traffic, overrides."
    ]


@pytest.mark.parametrize("missing", ["name", "endpoint", "limit", "window"])
def test_a_required_field_is_required(missing: str, row: RowFactory) -> None:
    rows = [row(name="first"), {k: v for k, v in row().items() if k != missing}]
    label = "row 2" if missing == "name" else "row 2 (login)"
    hint = " (or give a calendar)" if missing == "window" else ""
    assert problems_of(rows) == [f"{label}: {missing}: this field is required{hint}."]


@pytest.mark.parametrize(
    ("name", "value", "described"),
    [
        ("limit", True, "a boolean (true)"),
        ("limit", False, "a boolean (false)"),
        ("window", True, "a boolean (true)"),
        ("limit", "5", "a string ('5')"),
        ("limit", 5.0, "a number (5.0)"),
        ("window", None, "null"),
    ],
)
def test_limit_and_window_must_be_integers(
    name: str, value: Any, described: str, row: RowFactory
) -> None:
    assert problems_of([row(**{name: value})]) == [
        f"row 1 (login): {name}: must be an integer, not {described}."
    ]


@pytest.mark.parametrize(
    ("name", "value", "described"),
    [
        ("fail_open", "false", "a string ('false')"),
        ("fail_open", "yes", "a string ('yes')"),
        ("enabled", 1, "an integer (1)"),
        ("enabled", 0, "an integer (0)"),
        ("enabled", None, "null"),
    ],
)
def test_fail_open_and_enabled_must_be_booleans(
    name: str, value: Any, described: str, row: RowFactory
) -> None:
    assert problems_of([row(**{name: value})]) == [
        f"row 1 (login): {name}: must be true or false, not {described}."
    ]


@pytest.mark.parametrize(
    ("name", "value", "described"),
    [
        ("endpoint", 404, "an integer (404)"),
        ("endpoint", None, "null"),
        ("methods", ["GET", "POST"], "a list"),
        ("algorithm", None, "null"),
        ("key", {"header": "X"}, "a mapping"),
        ("mode", True, "a boolean (true)"),
        ("methods", datetime.date(2024, 1, 1), "a date (datetime.date(2024, 1, 1))"),
    ],
)
def test_text_fields_must_be_strings(
    name: str, value: Any, described: str, row: RowFactory
) -> None:
    assert problems_of([row(**{name: value})]) == [
        f"row 1 (login): {name}: must be a string, not {described}."
    ]


def test_a_name_that_is_not_a_string_is_refused_and_the_row_has_no_label(row: RowFactory) -> None:
    assert problems_of([row(name=123)]) == ["row 1: name: must be a string, not an integer (123)."]


def test_yaml_typing_surprises_are_caught() -> None:
    """YAML reads ``no`` as false and ``5.0`` as a float: the strict types refuse both."""
    text = "- {name: login, endpoint: api:login, limit: 5.0, window: 60, mode: no}\n"
    assert problems_of(parse_document(text, "yaml", "p")) == [
        "row 1 (login): limit: must be an integer, not a number (5.0).",
        "row 1 (login): mode: must be a string, not a boolean (false).",
    ]


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        ({"limit": 0}, "limit: Ensure this value is greater than or equal to 1."),
        ({"limit": -3}, "limit: Ensure this value is greater than or equal to 1."),
        ({"window": 0}, "window: Ensure this value is greater than or equal to 1."),
        (
            {"window": MAX_WINDOW + 1},
            f"window: Ensure this value is less than or equal to {MAX_WINDOW}.",
        ),
        ({"algorithm": "leaky_bucket"}, "algorithm: Value 'leaky_bucket' is not a valid choice."),
        ({"algorithm": "Sliding_Log"}, "algorithm: Value 'Sliding_Log' is not a valid choice."),
        ({"mode": "audit"}, "mode: Value 'audit' is not a valid choice."),
        ({"endpoint": "api search"}, "endpoint: The endpoint cannot contain spaces"),
        ({"endpoint": "   "}, "endpoint: This field cannot be blank."),
        ({"methods": "GET,FETCH"}, "methods: Unknown HTTP method(s): FETCH."),
        ({"methods": "GET;POST"}, "methods: Unknown HTTP method(s): GET;POST."),
        ({"key": "cookie"}, "key: 'cookie' is not a client key."),
        ({"key": "header:Bad Name"}, "key: 'Bad Name' is not a valid HTTP header name"),
        ({"key": "user\n"}, "key: 'user\\n' is not a client key."),
        ({"key": ""}, "key: This field cannot be blank."),
        (
            {"endpoint": "x" * 1001},
            "endpoint: Ensure this value has at most 1000 characters",
        ),
    ],
)
def test_the_model_validation_is_reported_per_field(
    overrides: dict[str, Any], line: str, row: RowFactory
) -> None:
    (problem,) = problems_of([row(**overrides)])
    assert problem.startswith(f"row 1 (login): {line}")


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("not a slug", "row 1 (not a slug)"),
        ("a/b", "row 1 (a/b)"),
        ("login\n", "row 1 ('login\\n')"),  # one line per problem, even so
        ("", "row 1"),
    ],
)
def test_a_bad_name_is_reported(name: str, label: str, row: RowFactory) -> None:
    problems = problems_of([row(name=name)])
    assert problems
    assert all(p.startswith(f"{label}: name: ") for p in problems)
    assert all("\n" not in p for p in problems)


def test_the_model_validation_applies_to_updates_too(row: RowFactory) -> None:
    Policy.objects.create(**row())
    assert problems_of([row(key="cookie")]) == [
        "row 1 (login): key: 'cookie' is not a client key. Use user, ip, user_or_ip, anon, "
        "global, username, session or header:<Name>, or two of them joined by + "
        "(username+ip)."
    ]


def test_duplicate_names_name_both_rows(row: RowFactory) -> None:
    rows = [row(), row(name="other"), row(limit=10)]
    assert problems_of(rows) == [
        "row 3 (login): name: 'login' is also the name of row 1; names must be unique."
    ]


def test_duplicate_names_of_a_stored_policy_are_refused(row: RowFactory) -> None:
    Policy.objects.create(**row())
    assert problems_of([row(limit=1), row(limit=2), row(limit=3)]) == [
        "row 2 (login): name: 'login' is also the name of row 1; names must be unique.",
        "row 3 (login): name: 'login' is also the name of row 1; names must be unique.",
    ]


def test_a_duplicate_row_is_still_validated(row: RowFactory) -> None:
    assert problems_of([row(), row(limit=0)]) == [
        "row 2 (login): name: 'login' is also the name of row 1; names must be unique.",
        "row 2 (login): limit: Ensure this value is greater than or equal to 1.",
    ]


def test_a_row_that_is_not_a_mapping_is_refused_by_the_plan_too(row: RowFactory) -> None:
    assert problems_of([row(), ["login"]]) == [
        "row 2: expected a mapping of field names to values, not a list."
    ]


def test_every_problem_of_every_row_is_reported_together_and_nothing_is_written(
    row: RowFactory, snapshot: Snapshot
) -> None:
    Policy.objects.create(name="keep", endpoint="api:keep", limit=5, window=60)
    Policy.objects.create(name="bad-update", endpoint="api:x", limit=5, window=60)
    before = snapshot()
    rows = [
        row(name="fine"),
        row(name="keep", limit=0),
        row(name="bad-update", window=True, key="cookie", colour="red"),
        {"name": "half", "limit": 3},
        row(name="fine"),
        row(name="new", algorithm="leaky_bucket", methods="FETCH", enabled="yes"),
    ]
    assert problems_of(rows, prune=True) == [
        "row 2 (keep): limit: Ensure this value is greater than or equal to 1.",
        "row 3 (bad-update): unknown field(s) 'colour'; the fields are name, endpoint, methods, "
        "algorithm, limit, window, key, mode, fail_open, enabled, shards, burst, cost, counts, "
        "calendar, time_zone, lockout, lockout_until_lifted, extend_lockout, reset_on_success, "
        "ipv6_prefix, traffic, overrides.",
        "row 3 (bad-update): window: must be an integer, not a boolean (true).",
        "row 3 (bad-update): key: 'cookie' is not a client key. Use user, ip, user_or_ip, "
        "anon, global, username, session or header:<Name>, or two of them joined by + "
        "(username+ip).",
        "row 4 (half): endpoint: this field is required.",
        "row 4 (half): window: this field is required (or give a calendar).",
        "row 5 (fine): name: 'fine' is also the name of row 1; names must be unique.",
        "row 6 (new): enabled: must be true or false, not a string ('yes').",
        "row 6 (new): methods: Unknown HTTP method(s): FETCH. Use a comma-separated list of "
        "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, CONNECT, or leave blank for "
        "every method.",
        "row 6 (new): algorithm: Value 'leaky_bucket' is not a valid choice.",
    ]
    assert snapshot() == before
