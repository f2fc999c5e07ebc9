"""A sign-in lockout in the admin: live usage lists the locked username (by its hash),
and the reset form lifts it when the operator types ``username:<name>``."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from ratelimits.engine.keys.identity import username_identity
from tests.helpers import create_policy

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.auth_urls")]

CHANGELIST = "/admin/ratelimits/policy/"
BACKENDS = ["ratelimits.backends.RateLimitBackend", "django.contrib.auth.backends.ModelBackend"]


def test_a_locked_username_is_shown_and_lifted(admin_client: Any, client: Any, settings: Any):
    settings.AUTHENTICATION_BACKENDS = BACKENDS
    User.objects.create_user("victim", password="right-password")
    policy = create_policy(
        "sign-in", "login", limit=1, window=600, key="username", counts="sign_in_failures",
        lockout=600,
    )  # fmt: skip
    wrong = {"username": "victim", "password": "guess"}
    # The first failure spends the only unit: it is answered as locked, the next starts the lock.
    assert [client.post("/accounts/login/", wrong).status_code for _ in range(2)] == [429, 429]

    page = admin_client.get(f"{CHANGELIST}{policy.pk}/change/")
    assert page.status_code == 200, page
    (row,) = page.context["live_usage"].rows
    assert row.identity == username_identity("victim")
    assert "victim" not in page.content.decode().split('id="ratelimits-live-usage"')[1]

    reset = admin_client.post(
        f"{CHANGELIST}{policy.pk}/reset-counters/", {"identity": "username:victim"}, follow=True
    )
    assert reset.status_code == 200
    right = {"username": "victim", "password": "right-password"}
    assert client.post("/accounts/login/", right).status_code == 302
