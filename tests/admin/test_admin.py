"""The admin registration: list, add and edit policies, with validation errors on the form."""

from __future__ import annotations

import pytest

from ratelimits.models import Policy

pytestmark = pytest.mark.django_db

GOOD = {
    "name": "login",
    "enabled": "on",
    "mode": "enforce",
    "endpoint": "api:login",
    "methods": "post",
    "algorithm": "sliding_log",
    "limit": "5",
    "window": "60",
    "key": "ip",
    "fail_open": "on",
    "shards": "1",
    "cost": "1",
    # The overrides inline's management form: no override rows.
    "overrides-TOTAL_FORMS": "0",
    "overrides-INITIAL_FORMS": "0",
}


@pytest.fixture
def staff(admin_client):
    return admin_client


def test_add_a_policy(staff):
    response = staff.post("/admin/ratelimits/policy/add/", GOOD)
    assert response.status_code == 302
    policy = Policy.objects.get(name="login")
    assert (policy.methods, policy.limit, policy.window, policy.key) == ("POST", 5, 60, "ip")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("limit", "0", "greater than or equal to 1"),
        ("window", "2592001", "less than or equal to 2592000"),
        ("key", "header:Bad Name", "not a valid HTTP header name"),
        ("methods", "GET,FETCH", "Unknown HTTP method(s): FETCH"),
        ("endpoint", "api: search", "cannot contain spaces"),
    ],
)
def test_bad_input_is_shown_on_its_field_and_saves_nothing(staff, field, value, message):
    response = staff.post("/admin/ratelimits/policy/add/", {**GOOD, field: value})
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field]
    assert message in " ".join(errors[field])
    assert not Policy.objects.exists()


def test_changelist_shows_the_rate_in_words(staff):
    Policy.objects.create(
        name="items", endpoint="api:items", algorithm="fixed_window", limit=10, window=10
    )
    response = staff.get("/admin/ratelimits/policy/")
    assert response.status_code == 200
    assert "10 per 10 s" in response.content.decode()


def test_edit_a_policy(staff):
    policy = Policy.objects.create(
        name="items", endpoint="api:items", algorithm="fixed_window", limit=10, window=10
    )
    response = staff.post(
        f"/admin/ratelimits/policy/{policy.pk}/change/", {**GOOD, "name": "items", "limit": "7"}
    )
    assert response.status_code == 302
    policy.refresh_from_db()
    assert policy.limit == 7
