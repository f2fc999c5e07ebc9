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
    "counts": "all",
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


def test_counts_is_on_the_form_beside_the_cost(staff):
    response = staff.get("/admin/ratelimits/policy/add/")
    fieldsets = dict(response.context["adminform"].fieldsets)
    fields = list(fieldsets["The limit"]["fields"])
    assert fields[fields.index("cost") + 1] == "counts"
    assert 'name="counts"' in response.content.decode()


def test_add_a_policy_that_counts_failures_only(staff):
    response = staff.post("/admin/ratelimits/policy/add/", {**GOOD, "counts": "failures"})
    assert response.status_code == 302
    assert Policy.objects.get(name="login").counts == "failures"
    listing = staff.get("/admin/ratelimits/policy/").content.decode()
    assert "5 per 60 s, failures only" in listing


@pytest.mark.parametrize("counts", ["failures", "successes"])
def test_a_concurrency_policy_that_does_not_count_all_is_refused_on_counts(staff, counts):
    data = {**GOOD, "algorithm": "concurrency", "counts": counts}
    response = staff.post("/admin/ratelimits/policy/add/", data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["counts"]
    assert "A concurrency policy gives every slot back" in " ".join(errors["counts"])
    assert not Policy.objects.exists()


def test_switching_a_failures_only_policy_to_concurrency_is_refused_on_counts(staff):
    policy = Policy.objects.create(
        name="login", endpoint="api:login", limit=5, window=60, counts="failures"
    )
    data = {**GOOD, "algorithm": "concurrency", "counts": "failures"}
    response = staff.post(f"/admin/ratelimits/policy/{policy.pk}/change/", data)
    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == ["counts"]
    policy.refresh_from_db()
    assert (policy.algorithm, policy.counts) == ("sliding_counter", "failures")


def test_a_concurrency_policy_is_added_and_listed_in_words(staff):
    data = {**GOOD, "algorithm": "concurrency", "limit": "2"}
    assert staff.post("/admin/ratelimits/policy/add/", data).status_code == 302
    assert Policy.objects.get(name="login").algorithm == "concurrency"
    assert "2 at once, lease 60 s" in staff.get("/admin/ratelimits/policy/").content.decode()


def test_the_list_filters_by_counts_and_by_concurrency(staff):
    Policy.objects.create(name="all", endpoint="a", limit=5, window=60)
    Policy.objects.create(name="fails", endpoint="b", limit=5, window=60, counts="failures")
    Policy.objects.create(name="wins", endpoint="c", limit=5, window=60, counts="successes")
    Policy.objects.create(name="pool", endpoint="d", algorithm="concurrency", limit=2, window=30)

    def shown(**query: str) -> list[str]:
        response = staff.get("/admin/ratelimits/policy/", query)
        return [p.name for p in response.context["cl"].result_list]

    assert shown(counts__exact="failures") == ["fails"]
    assert shown(counts__exact="successes") == ["wins"]
    assert shown(counts__exact="all") == ["all", "pool"]
    assert shown(algorithm__exact="concurrency") == ["pool"]
    html = staff.get("/admin/ratelimits/policy/").content.decode()
    assert "?counts__exact=failures" in html
    assert "?algorithm__exact=concurrency" in html
