"""The validation matrix of ``Policy``: ``full_clean()`` and the database constraints agree."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from ratelimits.models import Policy, PolicyOverride
from ratelimits.validators import MAX_WINDOW

pytestmark = pytest.mark.django_db

GOOD: dict[str, Any] = {"name": "search", "endpoint": "api:search", "limit": 5, "window": 60}


def make(**overrides: Any) -> Policy:
    """An unsaved policy: :data:`GOOD` with ``overrides``."""
    return Policy(**{**GOOD, **overrides})


def clean_errors(policy: Policy) -> dict[str, list[ValidationError]]:
    """``full_clean()``'s errors by field name; empty when the policy is valid."""
    try:
        policy.full_clean()
    except ValidationError as e:
        return e.error_dict
    return {}


def messages(errors: list[ValidationError]) -> str:
    """The rendered messages of ``errors`` (parameters filled in), one per line."""
    return "\n".join(message for error in errors for message in error.messages)


def test_the_good_policy_is_valid() -> None:
    assert clean_errors(make()) == {}


# --- full_clean: the field and the reason --------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "field", "code", "reason"),
    [
        ({"limit": 0}, "limit", "min_value", "greater than or equal to 1"),
        ({"limit": -1}, "limit", "min_value", "greater than or equal to 1"),
        ({"window": 0}, "window", "min_value", "greater than or equal to 1"),
        ({"window": MAX_WINDOW + 1}, "window", "max_value", "less than or equal to 2592000"),
        ({"key": "header:"}, "key", "invalid_header_name", "not a valid HTTP header name"),
        ({"key": "header:Bad Name"}, "key", "invalid_header_name", "'Bad Name' is not a valid"),
        ({"key": "header:X(1)"}, "key", "invalid_header_name", "'X(1)' is not a valid"),
        ({"key": "header:" + "X" * 65}, "key", "invalid_header_name", "1 to 64"),
        ({"key": "cookie"}, "key", "invalid_key", "'cookie' is not a client key"),
        ({"key": ""}, "key", "blank", "cannot be blank"),
        ({"methods": "FETCH"}, "methods", "invalid_methods", "Unknown HTTP method(s): FETCH."),
        ({"methods": "GET;POST"}, "methods", "invalid_methods", "method(s): GET;POST."),
        ({"endpoint": ""}, "endpoint", "blank", "cannot be blank"),
        ({"endpoint": "   "}, "endpoint", "blank", "cannot be blank"),  # stripped first
        ({"endpoint": "api search"}, "endpoint", "invalid_endpoint", "cannot contain spaces"),
        ({"name": "not a slug"}, "name", "invalid", "slug"),
        ({"name": "a/b"}, "name", "invalid", "slug"),
    ],
    ids=lambda v: repr(v) if isinstance(v, dict) else None,
)
def test_full_clean_names_the_field_and_the_reason(
    overrides: dict[str, Any], field: str, code: str, reason: str
) -> None:
    errors = clean_errors(make(**overrides))
    assert field in errors, errors
    assert code in [error.code for error in errors[field]]
    assert reason in messages(errors[field])
    # The bad value is reported against its own field only, not against another one.
    assert set(errors) - {"__all__"} == {field}


@pytest.mark.parametrize("window", [1, MAX_WINDOW])
def test_window_bounds_are_inclusive(window: int) -> None:
    assert clean_errors(make(window=window)) == {}


@pytest.mark.parametrize(
    "key", ["user", "ip", "user_or_ip", "global", "header:X-Api-Key", "header:" + "X" * 64]
)
def test_good_keys_are_accepted(key: str) -> None:
    policy = make(key=key)
    assert clean_errors(policy) == {}
    assert policy.key == key


def test_blank_methods_are_accepted() -> None:
    policy = make(methods="")
    assert clean_errors(policy) == {}
    assert policy.methods == ""


def test_full_clean_normalises_methods() -> None:
    policy = make(methods="get, post,GET")
    assert clean_errors(policy) == {}
    assert policy.methods == "GET,POST"


@pytest.mark.parametrize("methods", ["FETCH", "GET;POST"])
def test_bad_methods_are_reported_on_the_field_only(methods: str) -> None:
    errors = clean_errors(make(methods=methods))
    assert set(errors) == {"methods"}


def test_full_clean_strips_the_endpoint() -> None:
    policy = make(endpoint="  api:search ")
    assert clean_errors(policy) == {}
    assert policy.endpoint == "api:search"


def test_save_strips_the_endpoint() -> None:
    policy = Policy.objects.create(**{**GOOD, "endpoint": "  api:search "})
    assert Policy.objects.values_list("endpoint", flat=True).get(pk=policy.pk) == "api:search"


@pytest.mark.parametrize("key", ["user\n", "header:X-Api-Key\n"])
def test_a_key_with_a_trailing_newline_is_rejected(key: str) -> None:
    errors = clean_errors(make(key=key))
    assert "key" in errors


def test_duplicate_name_is_rejected_on_name() -> None:
    Policy.objects.create(**GOOD)
    errors = clean_errors(make(endpoint="/other/*"))
    assert "name" in errors
    assert [error.code for error in errors["name"]] == ["unique"]
    assert "already exists" in messages(errors["name"])


# --- The database refuses what clean() refuses --------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "constraint"),
    [
        ({"limit": 0}, "ratelimits_policy_limit_gte_1"),
        ({"window": 0}, "ratelimits_policy_window_range"),
        ({"window": MAX_WINDOW + 1}, "ratelimits_policy_window_range"),
        ({"key": "cookie"}, "ratelimits_policy_key_valid"),
        ({"key": "header:Bad Name"}, "ratelimits_policy_key_valid"),
        ({"key": "header:"}, "ratelimits_policy_key_valid"),
        ({"methods": "FETCH"}, "ratelimits_policy_methods_valid"),
        ({"methods": "GET;POST"}, "ratelimits_policy_methods_valid"),
        ({"endpoint": ""}, "ratelimits_policy_endpoint_not_blank"),
        ({"endpoint": "   "}, "ratelimits_policy_endpoint_not_blank"),
        ({"endpoint": "api search"}, "ratelimits_policy_endpoint_not_blank"),
        ({"algorithm": "leaky_bucket"}, "ratelimits_policy_algorithm_valid"),
        ({"burst": 4}, "ratelimits_policy_burst_range"),  # not a token bucket
        ({"algorithm": "token_bucket", "burst": 0}, "ratelimits_policy_burst_range"),
        ({"cost": 0}, "ratelimits_policy_cost_range"),
        ({"counts": "sometimes"}, "ratelimits_policy_counts_valid"),
        ({"algorithm": "concurrency", "counts": "failures"}, "ratelimits_policy_counts_valid"),
        ({"mode": "audit"}, "ratelimits_policy_mode_valid"),
        ({"name": "not a slug"}, "ratelimits_policy_name_slug"),
        ({"name": "search\n"}, "ratelimits_policy_name_slug"),
    ],
    ids=lambda v: repr(v) if isinstance(v, dict) else None,
)
def test_the_database_refuses_what_clean_refuses(
    overrides: dict[str, Any], constraint: str
) -> None:
    with pytest.raises(IntegrityError) as raised, transaction.atomic():
        Policy.objects.create(**{**GOOD, **overrides})
    assert constraint in str(raised.value)  # SQLite and PostgreSQL both name it
    assert not Policy.objects.exists()


#: Every character Python's ``\s`` matches, which the form refuses in an endpoint.
PYTHON_WHITESPACE = [chr(c) for c in range(0x110000) if re.match(r"\s", chr(c))]


@pytest.mark.parametrize("space", PYTHON_WHITESPACE, ids=lambda c: f"U+{ord(c):04X}")
def test_the_database_refuses_every_space_the_form_refuses(space: str) -> None:
    r"""On every database: PostgreSQL's regex ``\s`` alone misses U+00A0 and others."""
    endpoint = f"api{space}search"
    assert "endpoint" in clean_errors(make(endpoint=endpoint))
    with pytest.raises(IntegrityError), transaction.atomic():
        Policy.objects.create(**{**GOOD, "endpoint": endpoint})
    policy = Policy.objects.create(**GOOD)
    with pytest.raises(IntegrityError), transaction.atomic():
        Policy.objects.filter(pk=policy.pk).update(endpoint=endpoint)
    assert Policy.objects.get(pk=policy.pk).endpoint == "api:search"


@pytest.mark.parametrize("endpoint", ["/café/*", "api·search", "/api/\u200bsearch/"])
def test_the_database_stores_endpoints_without_spaces(endpoint: str) -> None:
    """The control: other characters outside ASCII are no spaces, on either side."""
    assert "endpoint" not in clean_errors(make(endpoint=endpoint))
    Policy.objects.create(**{**GOOD, "endpoint": endpoint})
    assert Policy.objects.get(name=GOOD["name"]).endpoint == endpoint


def test_the_good_policy_is_stored() -> None:
    """The control for the test above: the same create() without a bad value succeeds."""
    Policy.objects.create(**GOOD)
    assert Policy.objects.filter(name="search").exists()


@pytest.mark.parametrize(
    "changes", [{"limit": 0}, {"window": MAX_WINDOW + 1}, {"key": "cookie"}, {"endpoint": ""}]
)
def test_queryset_update_cannot_bypass_the_constraints(changes: dict[str, Any]) -> None:
    policy = Policy.objects.create(**GOOD)
    with pytest.raises(IntegrityError), transaction.atomic():
        Policy.objects.filter(pk=policy.pk).update(**changes)
    policy.refresh_from_db()
    assert (policy.limit, policy.window, policy.key, policy.endpoint) == (
        5,
        60,
        "user_or_ip",
        "api:search",
    )


def test_orm_save_stores_normalised_methods() -> None:
    policy = Policy.objects.create(**{**GOOD, "methods": "post,get"})
    assert Policy.objects.values_list("methods", flat=True).get(pk=policy.pk) == "GET,POST"


def test_rate_display() -> None:
    assert make(limit=5, window=60).rate_display == "5 per 60 s"
    assert make(limit=1000, window=3600).rate_display == "1000 per 3600 s"


def test_rate_display_names_a_buckets_burst_and_a_cost() -> None:
    bucket = make(algorithm="token_bucket", limit=2, window=2, burst=4)
    assert bucket.rate_display == "2 per 2 s, burst 4"
    assert make(algorithm="token_bucket", limit=2, window=2).rate_display == "2 per 2 s"
    assert make(limit=100, window=60, cost=5).rate_display == "100 per 60 s, cost 5"


def test_a_token_bucket_with_a_burst_is_valid() -> None:
    assert clean_errors(make(algorithm="token_bucket", limit=2, window=2, burst=4)) == {}
    assert clean_errors(make(algorithm="token_bucket", limit=2, window=2)) == {}  # the limit


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"burst": 4}, "burst", "Only a token_bucket policy has a burst"),
        ({"algorithm": "token_bucket", "burst": 0}, "burst", "greater than or equal to 1"),
        ({"algorithm": "token_bucket", "burst": 2, "shards": 3}, "shards", "At most the burst"),
        ({"cost": 0}, "cost", "greater than or equal to 1"),
        ({"cost": 2**31}, "cost", "less than or equal to 2147483647"),
    ],
)
def test_burst_and_cost_are_checked_on_their_field(
    overrides: dict[str, Any], field: str, message: str
) -> None:
    errors = clean_errors(make(**overrides))
    assert list(errors) == [field]
    assert message in messages(errors[field])


def test_queryset_update_cannot_make_a_concurrency_policy_count_failures() -> None:
    policy = Policy.objects.create(**GOOD, counts="failures")
    with pytest.raises(IntegrityError), transaction.atomic():
        Policy.objects.filter(pk=policy.pk).update(algorithm="concurrency")
    policy.refresh_from_db()
    assert (policy.algorithm, policy.counts) == ("sliding_counter", "failures")


def test_rate_display_of_counts_and_concurrency() -> None:
    assert make(counts="failures").rate_display == "5 per 60 s, failures only"
    assert make(counts="successes", cost=2).rate_display == "5 per 60 s, cost 2, successes only"
    pool = make(algorithm="concurrency", limit=2, window=30)
    assert pool.rate_display == "2 at once, lease 30 s"


@pytest.mark.parametrize("algorithm", ["sliding_log", "sliding_counter", "token_bucket"])
@pytest.mark.parametrize("counts", ["all", "failures", "successes"])
def test_every_counts_is_valid_for_a_rate(algorithm: str, counts: str) -> None:
    assert clean_errors(make(algorithm=algorithm, counts=counts)) == {}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"counts": "sometimes"}, "Value 'sometimes' is not a valid choice."),
        ({"algorithm": "concurrency", "counts": "failures"}, "gives every slot back"),
        ({"algorithm": "concurrency", "counts": "successes"}, "gives every slot back"),
    ],
)
def test_counts_is_checked_on_its_field(overrides: dict[str, Any], message: str) -> None:
    errors = clean_errors(make(**overrides))
    assert list(errors) == ["counts"]
    assert message in messages(errors["counts"])
    assert clean_errors(make(algorithm="concurrency")) == {}  # counts all: the control


# --- calendar windows and lockouts ---------------------------------------------------------

FIXED = {"algorithm": "fixed_window"}


@pytest.mark.parametrize(
    ("overrides", "field", "reason"),
    [
        (
            {**FIXED, "calendar": "month", "time_zone": "Mars/Olympus"},
            "time_zone",
            "'Mars/Olympus' is not a known time zone",
        ),
        (
            {**FIXED, "calendar": "month", "time_zone": "../etc/passwd"},
            "time_zone",
            "not a known time zone",
        ),
        (
            {"calendar": "month"},
            "calendar",
            "Only a fixed_window policy counts in calendar periods",
        ),
        ({**FIXED, "calendar": "year"}, "calendar", "not a valid choice"),
        (
            {**FIXED, "time_zone": "Europe/Berlin"},
            "time_zone",
            "Only a calendar period has a time zone",
        ),
        ({"lockout": -1}, "lockout", "greater than or equal to 0"),
        ({"lockout": MAX_WINDOW + 1}, "lockout", "less than or equal to 2592000"),
        ({"lockout": 60, "shards": 2}, "lockout", "A lockout needs one shard"),
        ({"lockout": 60, "algorithm": "concurrency"}, "lockout", "no lockout"),
    ],
    ids=lambda v: repr(v) if isinstance(v, dict) else None,
)
def test_calendar_and_lockout_are_checked_on_their_field(
    overrides: dict[str, Any], field: str, reason: str
) -> None:
    errors = clean_errors(make(**overrides))
    assert list(errors) == [field]
    assert reason in messages(errors[field])


@pytest.mark.parametrize(
    "overrides",
    [
        {"calendar": "month"},  # not a fixed window
        {**FIXED, "calendar": "year"},
        {"time_zone": "Europe/Berlin"},  # without a calendar
        {"lockout": 60, "shards": 2},
        {"lockout": 60, "algorithm": "concurrency"},
    ],
    ids=repr,
)
def test_the_database_refuses_a_calendar_or_lockout_clean_refuses(
    overrides: dict[str, Any],
) -> None:
    with pytest.raises(IntegrityError) as raised, transaction.atomic():
        Policy.objects.create(**{**GOOD, **overrides})
    assert "calendar_valid" in str(raised.value) or "lockout_valid" in str(raised.value)


def test_a_calendar_policy_is_valid_and_keeps_the_period_s_window() -> None:
    policy = make(**FIXED, calendar="month", time_zone="Europe/Berlin", limit=10_000, window=7)
    assert clean_errors(policy) == {}
    assert policy.window == 30 * 86400
    assert policy.rate_display == "10,000 per calendar month (Europe/Berlin)"


def test_a_calendar_policy_without_a_zone_is_in_the_site_s(settings) -> None:
    settings.TIME_ZONE = "America/New_York"
    policy = make(**FIXED, calendar="week")
    assert clean_errors(policy) == {}
    assert policy.rate_display == "5 per calendar week (America/New_York)"


def test_a_lockout_is_valid_and_worded() -> None:
    policy = make(lockout=900, counts="failures")
    assert clean_errors(policy) == {}
    assert policy.rate_display == "5 per 60 s, failures only, then locked out 15 min"


def test_an_override_of_a_calendar_policy_is_worded_in_its_period_and_zone() -> None:
    policy = make(**FIXED, calendar="month", time_zone="Pacific/Auckland")
    policy.full_clean()
    override = PolicyOverride(policy=policy, identity="203.0.113.7", limit=50)
    assert override.rate_under(policy) == "50 per calendar month (Pacific/Auckland)"
