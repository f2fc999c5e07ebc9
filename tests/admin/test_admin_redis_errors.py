"""The admin names what Redis answered: a permission refused is not "did not answer"
(an ACL user without SCAN, on a real server), a Redis that is gone still is."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from ratelimits.models import Policy
from ratelimits.testutils import RedisServer, reset_state
from tests.helpers import caches_at

pytestmark = pytest.mark.django_db


def test_live_usage_names_a_refused_permission(admin_client, settings: Any) -> None:
    row = Policy.objects.create(
        name="items", endpoint="api:items", algorithm="sliding_log", limit=5, window=3600,
        key="ip",
    )  # fmt: skip
    page = reverse("admin:ratelimits_policy_change", args=[row.pk])
    with RedisServer() as server:
        server.client().execute_command(
            "ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-scan"
        )
        location = f"redis://app:pw@127.0.0.1:{server.port}/0"
        settings.CACHES = {"default": {**caches_at(server.port)["default"], "LOCATION": location}}
        reset_state()
        refused = admin_client.get(page).content.decode()
        assert "refused this user a command" in refused
        assert "did not answer" not in refused
        server.kill()
        reset_state()
        assert "Redis did not answer" in admin_client.get(page).content.decode()
