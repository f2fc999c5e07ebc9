"""Red team: the usage endpoint is no password oracle.

``/ratelimits/usage/`` authenticated with DRF's default classes, HTTP Basic among them,
and had no limit of its own: 12 wrong Basic passwords got 12 403s, each telling the
guesser the password was wrong, and its answers carried no ``Cache-Control``. It now
checks no password (a Basic caller is answered as anonymous, by its address) and every
answer is private and not stored.
"""

from __future__ import annotations

import base64

import pytest
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_login_failed

from tests.helpers import create_policy

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.usage_urls")]


def test_wrong_basic_passwords_tell_nothing_and_check_nothing(client, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "rest_framework.authentication.SessionAuthentication",
            "rest_framework.authentication.BasicAuthentication",
        ],
    }
    User.objects.create_user("victim", password="right-password")
    create_policy("search", "/*", limit=50, key="user_or_ip")
    checked: list[object] = []

    def count(sender: object, **kwargs: object) -> None:
        checked.append(kwargs)

    user_login_failed.connect(count)
    try:
        statuses = set()
        for guess in ("a", "b", "right-password"):
            token = base64.b64encode(f"victim:{guess}".encode()).decode()
            response = client.get("/ratelimits/usage/", HTTP_AUTHORIZATION=f"Basic {token}")
            statuses.add(response.status_code)
            # The same anonymous answer whatever the password: counted by address.
            assert response.json()["policies"][0]["counted_as"] == "ip"
    finally:
        user_login_failed.disconnect(count)
    assert statuses == {200}
    assert checked == []


def test_every_answer_is_private_and_not_stored(client):
    create_policy("search", "/*", limit=50)
    response = client.get("/ratelimits/usage/")
    assert response.status_code == 200
    cache_control = {part.strip() for part in response["Cache-Control"].split(",")}
    assert {"private", "no-store"} <= cache_control
