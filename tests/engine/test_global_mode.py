"""``RATELIMITS["MODE"]`` outside the faces: a bad value is a system-check error
(``ratelimits.E007``), the admin's dashboard says when the mode is not ``"enforce"``, and
the usage endpoint says it too."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import ERROR, run_checks
from django.test import override_settings

from ratelimits.testutils import limits_off, limits_shadow
from tests.helpers import create_policy, ratelimits_settings

DASHBOARD = "/admin/ratelimits/dashboard/"
BANNER = 'id="ratelimits-mode"'


def mode_messages() -> list[Any]:
    return [m for m in run_checks() if m.id == "ratelimits.E007"]


@pytest.mark.parametrize("value", ["Off", "disabled", "", None, 0, True, ["off"]])
def test_a_bad_mode_is_e007_and_the_three_modes_pass(value):
    with override_settings(RATELIMITS=ratelimits_settings(MODE=value)):
        [message] = mode_messages()
    assert message.level == ERROR
    assert repr(value) in message.msg
    assert "enforce, shadow, off" in message.msg
    assert "docs/settings.md" in message.hint
    for good in ("enforce", "shadow", "off"):
        with override_settings(RATELIMITS=ratelimits_settings(MODE=good)):
            assert mode_messages() == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("helper", "said"),
    [(limits_off, "Rate limiting is off"), (limits_shadow, "Every policy is in shadow mode")],
)
def test_the_dashboard_says_the_mode_when_it_is_not_enforce(admin_client, helper, said):
    create_policy("p", "*", limit=5)
    assert BANNER not in admin_client.get(DASHBOARD).content.decode()
    with helper():
        page = admin_client.get(DASHBOARD).content.decode()
    assert BANNER in page
    assert said in page


@pytest.mark.django_db
@pytest.mark.urls("project.urls")
def test_the_usage_endpoint_says_shadow_mode(client):
    create_policy("p", "*", limit=5, key="ip")
    assert [p["name"] for p in client.get("/ratelimits/usage/").json()["policies"]] == ["p"]
    with limits_shadow():
        answer = client.get("/ratelimits/usage/").json()
    assert answer == {"mode": "shadow", "policies": []}  # no policy denies anyone
