"""The Traffic panel's "Try it in shadow": Django's permissions and CSRF, bad input, a
shadow policy that takes the limit itself; and the panel's what-if refusing a bad limit."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client

from ratelimits.models import Policy
from tests.helpers import staff_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def search() -> Policy:
    return Policy.objects.create(
        name="search", endpoint="search", algorithm="fixed_window", limit=20, window=60, key="ip"
    )


def try_url(policy: Policy) -> str:
    return f"/admin/ratelimits/policy/{policy.pk}/try-in-shadow/"


def test_without_change_permission_there_is_no_button_and_the_view_refuses(search):
    client = staff_client("view_policy")
    page = client.get(f"/admin/ratelimits/policy/{search.pk}/change/")
    assert b'id="ratelimits-traffic"' in page.content
    assert b"ratelimits-try-in-shadow" not in page.content
    assert client.post(try_url(search), {"limit": "30"}).status_code == 403
    assert not Policy.objects.filter(name="search-shadow").exists()


def test_an_enforcing_policy_needs_add_permission_for_its_twin(search):
    client = staff_client("view_policy", "change_policy")
    assert client.post(try_url(search), {"limit": "30"}).status_code == 403
    assert not Policy.objects.filter(name="search-shadow").exists()


def test_a_shadow_policy_takes_the_limit_itself_logged_in_its_history(search):
    search.mode = "shadow"
    search.save()
    client = staff_client("view_policy", "change_policy")
    response = client.post(try_url(search), {"limit": "30"})
    assert response.status_code == 302
    search.refresh_from_db()
    assert (search.mode, search.limit) == ("shadow", 30)
    entry = LogEntry.objects.get(object_id=str(search.pk))
    assert "Trying the limit 30 in shadow" in entry.change_message
    assert not Policy.objects.filter(name="search-shadow").exists()


@pytest.mark.parametrize("limit", ["", "0", "-3", "ten", "1.5", "99999999999999"])
def test_a_bad_limit_is_a_message_not_a_500(search, limit):
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    response = client.post(try_url(search), {"limit": limit}, follow=True)
    assert response.status_code == 200
    assert b"Cannot try" in response.content
    assert Policy.objects.count() == 1


def test_csrf_is_required(search):
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post(try_url(search), {"limit": "30"}).status_code == 403
    assert not Policy.objects.filter(name="search-shadow").exists()


def test_the_what_if_refuses_a_bad_limit_in_the_panel(search):
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    page = client.get(f"/admin/ratelimits/policy/{search.pk}/change/?what_if=abc&traffic_since=9y")
    assert page.status_code == 200
    assert "“abc” is not a limit" in page.content.decode()
