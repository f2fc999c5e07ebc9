"""Which policies a DRF view's failed authentication moves before the framework
authenticates: only those that count failures (``tests/security/test_authentication_failures.py``
replays the attack); every other policy stays with the throttle, after authentication."""

from __future__ import annotations

import base64

import pytest

from tests.helpers import create_policy, statuses

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.auth_urls")]


def basic(username: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}"}


def test_policies_counting_every_request_stay_with_the_throttle(client, mallory, redis_client):
    """Only failures policies move before authentication: a user policy on the same view
    still counts the authenticated user, after DRF's authentication."""
    create_policy("per-user", "basic", limit=2, key="user")
    right = basic("mallory", "right-password")
    assert statuses(client, "/basic/", 3, **right) == [200, 200, 429]
    assert any(b"{u:" in key for key in redis_client.keys("rl:*"))
