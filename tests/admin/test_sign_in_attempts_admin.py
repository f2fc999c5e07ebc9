"""The sign-in audit trail in the admin: read-only, filtered and searched; exported as CSV
by whoever may view it (no cell a spreadsheet would run); an address's or a username's locks
lifted in every policy by whoever may reset counters, sending ``lockout_lifted``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from ratelimits.engine.keys.identity import username_identity
from ratelimits.models import SignInAttempt
from ratelimits.signals import lockout_lifted
from tests.cli.traffic import all_keys
from tests.helpers import create_policy

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.auth_urls")]

LIST = "/admin/ratelimits/signinattempt/"
BACKENDS = ["ratelimits.backends.RateLimitBackend", "django.contrib.auth.backends.ModelBackend"]


@pytest.fixture
def attempts() -> list[SignInAttempt]:
    now = timezone.now()
    rows = [
        ("alice", "203.0.113.7", "failed", now),
        ('=HYPERLINK("http://evil")', "203.0.113.7", "refused", now - timedelta(minutes=1)),
        ("bob", "198.51.100.2", "succeeded", now - timedelta(days=3)),
    ]
    return [
        SignInAttempt.objects.create(
            username=u, address=a, result=r, when=w, user_agent="UA", path="/accounts/login/"
        )
        for u, a, r, w in rows
    ]


def staff(*codenames: str) -> Client:
    user = User.objects.create_user("operator", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def shown(response: Any) -> list[str]:
    return [row.username for row in response.context["cl"].result_list]


def test_filters_and_search(admin_client, attempts):
    assert shown(admin_client.get(LIST)) == ["alice", attempts[1].username, "bob"]
    assert shown(admin_client.get(LIST, {"result__exact": "refused"})) == [attempts[1].username]
    assert shown(admin_client.get(LIST, {"q": "203.0.113"})) == ["alice", attempts[1].username]
    assert shown(admin_client.get(LIST, {"q": "bob"})) == ["bob"]
    since = {"when__gte": str(timezone.now() - timedelta(days=1))}
    assert "bob" not in shown(admin_client.get(LIST, since))


def test_nothing_can_be_added_or_edited(admin_client, attempts):
    assert admin_client.get(f"{LIST}add/").status_code == 403
    change = f"{LIST}{attempts[0].pk}/change/"
    assert admin_client.get(change).status_code == 200  # read-only view
    admin_client.post(change, {"username": "mallory", "result": "succeeded"})
    attempts[0].refresh_from_db()
    assert attempts[0].username == "alice"


def test_csv_export_with_the_view_permission(attempts):
    client = staff("view_signinattempt")
    response = client.post(
        LIST, {"action": "export_csv", "_selected_action": [a.pk for a in attempts]}
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="sign-in-attempts-')
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines[0] == "when,result,username,address,user_agent,path,policy"
    assert lines[1].split(",")[1:4] == ["failed", "alice", "203.0.113.7"]
    # An attacker's "username" never reaches a spreadsheet as a formula.
    assert lines[2].split(",")[2].startswith("\"'=HYPERLINK(")
    assert len(lines) == 4


def test_no_view_permission_no_list_no_export(attempts):
    client = staff()
    assert client.get(LIST).status_code == 403
    response = client.post(LIST, {"action": "export_csv", "_selected_action": [attempts[0].pk]})
    assert response.status_code == 403


def test_lifting_needs_the_reset_permission(attempts):
    client = staff("view_signinattempt")
    actions = [name for name, _ in client.get(LIST).context["action_form"].fields["action"].choices]
    assert "export_csv" in actions and "lift_addresses" not in actions
    chosen = {"action": "lift_addresses", "_selected_action": [attempts[0].pk]}
    response = client.post(LIST, chosen, follow=True)
    # Refused as an unknown action: nothing reset.
    assert [str(m) for m in response.context["messages"]] == ["No action selected."]


def test_lift_every_lock_of_an_address_and_of_a_username(admin_client, settings, redis_client):
    settings.AUTHENTICATION_BACKENDS = BACKENDS
    sign_in = {"window": 600, "counts": "sign_in_failures", "fail_open": False}
    create_policy("by-pair", "*", limit=1, key="username+ip", lockout=900, **sign_in)
    create_policy("by-username", "*", limit=5, key="username", lockout=900, **sign_in)
    for _ in range(2):
        Client().post(
            "/accounts/login/", {"username": "carol", "password": "x"}, REMOTE_ADDR="192.0.2.9"
        )
    carol = username_identity("carol")
    assert f"rl:{{{carol}+ip:192.0.2.9}}:by-pair:lock" in all_keys(redis_client)
    row = SignInAttempt.objects.create(
        username="carol", address="192.0.2.9", result="failed", when=timezone.now()
    )
    lifted: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        lifted.append(kwargs)

    lockout_lifted.connect(receiver, weak=False)
    try:
        response = admin_client.post(
            LIST, {"action": "lift_addresses", "_selected_action": [row.pk]}, follow=True
        )
    finally:
        lockout_lifted.disconnect(receiver)
    text = [str(m) for m in response.context["messages"]]
    assert text == ["Reset ip:192.0.2.9: 2 keys deleted, 1 lockout lifted."]
    assert [(x["policy"], x["lifted"], x["by"].username) for x in lifted] == [
        ("by-pair", "ip:192.0.2.9", "admin")
    ]
    left = all_keys(redis_client)
    assert not any("192.0.2.9" in key for key in left)
    assert f"rl:{{{carol}}}:by-username:log" in left
    response = admin_client.post(
        LIST, {"action": "lift_usernames", "_selected_action": [row.pk]}, follow=True
    )
    assert [str(m) for m in response.context["messages"]] == [
        "Reset username:carol: 1 keys deleted."
    ]
    assert not any(carol in key for key in all_keys(redis_client))
