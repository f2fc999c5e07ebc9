"""Red team / django-axes parity: how a locked sign-in is answered. The failure that
starts a lockout is answered as locked (429 with ``Retry-After``), as axes answers the
Nth failure, not the attempt after it; a script's request (``X-Requested-With:
XMLHttpRequest``) gets the refusal as JSON. Against the real Redis."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.helpers import username_sign_in_policy

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.auth_urls")]

IP1, IP2 = "203.0.113.1", "198.51.100.7"


@pytest.fixture(autouse=True)
def _backend_first(settings: Any) -> None:
    settings.AUTHENTICATION_BACKENDS = [
        "ratelimits.backends.RateLimitBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    User.objects.create_user("alice", password="alice-password")


def sign_in(username: str, password: str, ip: str = IP1, **headers: str) -> Any:
    data = {"username": username, "password": password}
    return Client().post("/accounts/login/", data, REMOTE_ADDR=ip, **headers)


def test_the_failure_that_starts_a_lockout_is_answered_as_locked():
    username_sign_in_policy(limit=3, lockout=900)
    answers = [sign_in("alice", "guess") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[2]["Retry-After"] == "900"
    # The lock holds: the right password is refused, from anywhere, for the lockout.
    refused = sign_in("alice", "alice-password", IP2)
    assert refused.status_code == 429
    assert 895 <= int(refused["Retry-After"]) <= 900


def test_without_a_lockout_the_last_failure_is_a_plain_failure():
    username_sign_in_policy(limit=3)
    assert [sign_in("alice", "guess").status_code for _ in range(3)] == [200, 200, 200]
    assert sign_in("alice", "alice-password").status_code == 429


def test_a_success_on_the_last_unit_is_not_answered_as_locked():
    username_sign_in_policy(limit=3, lockout=900)
    assert [sign_in("alice", "guess").status_code for _ in range(2)] == [200, 200]
    assert sign_in("alice", "alice-password").status_code == 302


def test_a_shadow_policy_never_answers_as_locked():
    username_sign_in_policy(limit=1, lockout=900, mode="shadow")
    assert [sign_in("alice", "guess").status_code for _ in range(3)] == [200, 200, 200]


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_X_REQUESTED_WITH": "XMLHttpRequest"},
        {"HTTP_X_REQUESTED_WITH": "xmlhttprequest", "HTTP_ACCEPT": "text/html"},
        {"HTTP_ACCEPT": "application/json"},
    ],
)
def test_a_scripts_refusal_is_json(headers: dict[str, str]):
    username_sign_in_policy(limit=1)
    sign_in("alice", "guess")
    refused = sign_in("alice", "alice-password", **headers)
    assert refused.status_code == 429
    assert refused["Content-Type"] == "application/json"
    body = json.loads(refused.content)
    assert body["retry_after"] == int(refused["Retry-After"]) > 0


def test_a_browsers_refusal_stays_text():
    username_sign_in_policy(limit=1)
    sign_in("alice", "guess")
    refused = sign_in("alice", "alice-password", HTTP_ACCEPT="text/html,*/*;q=0.8")
    assert refused.status_code == 429
    assert refused["Content-Type"].startswith("text/plain")
