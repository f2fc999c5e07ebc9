"""The admin on a policy whose endpoint matches no URL name, scope or path of the URLconf
(the demo project's: ``search`` is SearchView's throttle_scope, ``api:search`` its URL
name, ``/api/search/`` its path): saved with a warning naming the nearest match, and marked
in the changelist."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.messages import WARNING
from django.test import RequestFactory

from ratelimits.models import Policy
from tests.admin.test_admin import GOOD
from tests.helpers import make_policy, staff_client

pytestmark = pytest.mark.django_db

ADD = "/admin/ratelimits/policy/add/"
CHANGELIST = "/admin/ratelimits/policy/"
UNMATCHED = "matches no URL name, scope or path"


def warnings(response) -> list[str]:
    return [m.message for m in response.context["messages"] if m.level == WARNING]


@pytest.mark.parametrize(
    ("endpoint", "nearest"),
    [("serach", "search"), ("api/search/", "/api/search/"), ("api:serch", "api:search")],
)
def test_adding_a_policy_that_matches_nothing_saves_it_with_a_warning(
    admin_client, endpoint, nearest
):
    response = admin_client.post(ADD, {**GOOD, "endpoint": endpoint}, follow=True)
    assert response.status_code == 200
    assert Policy.objects.get(name="login").endpoint == endpoint  # saved all the same
    [warning] = warnings(response)
    assert f"The endpoint “{endpoint}” {UNMATCHED}" in warning
    assert f"Did you mean “{nearest}”?" in warning


def test_changing_the_endpoint_to_one_that_matches_nothing_warns(admin_client):
    policy = make_policy("login", endpoint="api:login")
    url = f"/admin/ratelimits/policy/{policy.pk}/change/"
    response = admin_client.post(url, {**GOOD, "endpoint": "serach"}, follow=True)
    policy.refresh_from_db()
    assert policy.endpoint == "serach"
    [warning] = warnings(response)
    assert UNMATCHED in warning and "Did you mean “search”?" in warning


def test_no_nearest_match_no_suggestion(admin_client):
    response = admin_client.post(ADD, {**GOOD, "endpoint": "zzzzzzzzzz"}, follow=True)
    [warning] = warnings(response)
    assert UNMATCHED in warning
    assert "Did you mean" not in warning


@pytest.mark.parametrize(
    "endpoint",
    [
        "api:search",  # a URL name
        "ninja:items",  # a django-ninja operation's URL name
        "search",  # a DRF throttle_scope
        "/api/payment/*",  # a path glob
        "/api/search/",  # a path
    ],
)
def test_an_endpoint_that_matches_saves_without_a_warning(admin_client, endpoint):
    response = admin_client.post(ADD, {**GOOD, "endpoint": endpoint}, follow=True)
    assert Policy.objects.get(name="login").endpoint == endpoint
    assert warnings(response) == []


def test_the_changelist_marks_the_policies_that_match_nothing(admin_client):
    make_policy("typo", endpoint="serach")
    make_policy("fine", endpoint="api:search")
    make_policy("glob", endpoint="/api/payment/*")
    html = admin_client.get(CHANGELIST).content.decode()
    assert html.count('class="ratelimits-unmatched"') == 1
    title = f"This endpoint {UNMATCHED} (nearest: search): the policy limits nothing."
    icon = '<img src="/static/admin/img/icon-alert.svg" alt="(matches nothing)"'
    assert f'serach {icon} title="{title}"' in html


def test_the_changelist_still_sorts_by_endpoint(admin_client):
    make_policy("b", endpoint="zzz")
    make_policy("a", endpoint="api:search")
    response = admin_client.get(CHANGELIST, {"o": "-2"})  # the second column, descending
    names = [p.name for p in response.context["cl"].result_list]
    assert names == ["b", "a"]


def test_the_changelist_reads_the_urlconf_once_per_page(admin_user):
    request = RequestFactory().get(CHANGELIST)
    request.user = admin_user
    model_admin = admin.site._registry[Policy]
    first = model_admin.get_list_display(request)
    assert model_admin.get_list_display(request) == first  # the same columns, not rebuilt
    assert first[1].__name__ == "endpoint"


def test_editing_a_row_in_the_changelist_does_not_warn(admin_client):
    policy = make_policy("typo", endpoint="serach")
    data = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": str(policy.pk),
        "form-0-limit": "7",
        "form-0-window": "60",
        "form-0-mode": "enforce",
        "form-0-enabled": "on",
        "_save": "Save",
    }
    response = admin_client.post(CHANGELIST, data, follow=True)
    policy.refresh_from_db()
    assert policy.limit == 7
    assert warnings(response) == []


def test_a_user_without_the_change_permission_still_cannot_save():
    policy = make_policy("login", endpoint="api:login")
    client = staff_client("view_policy")
    url = f"/admin/ratelimits/policy/{policy.pk}/change/"
    response = client.post(url, {**GOOD, "endpoint": "serach"})
    assert response.status_code == 403
    policy.refresh_from_db()
    assert policy.endpoint == "api:login"
    assert client.post(ADD, {**GOOD, "name": "other", "endpoint": "serach"}).status_code == 403
    assert not Policy.objects.filter(name="other").exists()
