"""``ratelimits adopt`` on a django-axes site: its ``AXES_*`` settings become sign-in
policies (in shadow unless told), and axes' own scenarios, replayed against ratelimits
through Django's test client and the real Redis, admit what axes admits: the pair
(alice locked at IP1, alice at IP2 and bob at IP1 let in), the Nth failure answered as
locked, reset on success, the lockout restarted by an attempt during it, the
block-list."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from ratelimits.models import Policy
from tests.helpers import run

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.account_urls")]

IP1, IP2, BLOCKED = "203.0.113.1", "198.51.100.7", "198.51.100.66"


def cooloff_of_request(request: Any) -> dt.timedelta:
    return dt.timedelta(minutes=5)


@pytest.fixture
def axes_site(settings: Any) -> Any:
    """A site set up as axes' docs show: the pair, 3 failures, an hour's cool-off."""
    settings.AUTHENTICATION_BACKENDS = [
        "ratelimits.backends.RateLimitBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
    settings.AXES_COOLOFF_TIME = 1
    settings.AXES_RESET_ON_SUCCESS = True
    settings.AXES_IP_BLACKLIST = [BLOCKED]
    for name in ("alice", "bob", "carol"):
        User.objects.create_user(name, password=f"{name}-password")
    return settings


def sign_in(username: str, password: str, ip: str) -> int:
    data = {"username": username, "password": password}
    return Client().post("/accounts/login/", data, REMOTE_ADDR=ip).status_code


def right(username: str, ip: str = IP1) -> int:
    return sign_in(username, f"{username}-password", ip)


def wrong(username: str, ip: str = IP1) -> int:
    return sign_in(username, "guess", ip)


def test_adopt_writes_the_equivalent_policies_in_shadow(axes_site):
    out = run("adopt")
    assert "created: axes-username-ip: sliding_log, 3 per 3600 s per username+ip" in out
    policy = Policy.objects.get()
    assert (policy.name, policy.key, policy.counts, policy.mode) == (
        "axes-username-ip",
        "username+ip",
        "sign_in_failures",
        "shadow",
    )
    assert (policy.limit, policy.window, policy.lockout) == (3, 3600, 3600)
    assert (policy.extend_lockout, policy.reset_on_success, policy.fail_open) == (
        True,
        True,
        False,
    )
    (block,) = policy.overrides.all()
    assert (block.identity, block.limit) == (f"ip:{BLOCKED}", 0)
    # In shadow nothing is refused yet.
    assert [wrong("alice") for _ in range(5)] == [200] * 5
    assert "Nothing to change." in run("adopt")


def test_axes_scenarios_admit_the_same_under_the_adopted_policies(axes_site, redis_client):
    run("adopt", "--mode", "enforce")
    # The pair: alice's third failure at IP1 locks alice at IP1 only (axes answers the
    # third failure itself with its lockout response).
    assert [wrong("alice") for _ in range(3)] == [200, 200, 429]
    assert right("alice") == 429
    assert right("alice", IP2) == 302
    assert right("bob") == 302
    # Reset on success: failures before a success are forgotten.
    assert [wrong("carol"), wrong("carol"), right("carol")] == [200, 200, 302]
    assert [wrong("carol"), wrong("carol"), right("carol")] == [200, 200, 302]
    # A failure during the lockout restarts it (axes' default).
    (lock,) = [k for k in redis_client.keys("*axes-username-ip:lock")]
    time.sleep(1.2)
    assert wrong("alice") == 429
    assert redis_client.pttl(lock) > 3_600_000 - 500
    # The block-list: anyone from that address, the right password too.
    assert right("bob", BLOCKED) == 429


@pytest.mark.parametrize(
    ("settings_", "expected"),
    [
        (
            {"AXES_COOLOFF_TIME": None},
            {"lockout_until_lifted": True, "lockout": 0, "extend_lockout": False},
        ),
        ({"AXES_COOLOFF_TIME": dt.timedelta(minutes=30)}, {"window": 1800, "lockout": 1800}),
        ({"AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT": False}, {"extend_lockout": False}),
        ({"AXES_ONLY_ADMIN_SITE": True}, {"endpoint": "admin:login"}),
        ({"AXES_LOCKOUT_PARAMETERS": [["ip_address", "username"]]}, {"key": "username+ip"}),
    ],
)
def test_each_setting_maps_to_its_field(axes_site, settings_: dict[str, Any], expected):
    for name, value in settings_.items():
        setattr(axes_site, name, value)
    run("adopt")
    policy = Policy.objects.get(name="axes-username-ip")
    assert {field: getattr(policy, field) for field in expected} == expected


def test_entries_are_policies_of_their_own(axes_site):
    axes_site.AXES_LOCKOUT_PARAMETERS = ["username", "ip_address", ["ip_address", "user_agent"]]
    run("adopt")
    keys = dict(Policy.objects.values_list("name", "key"))
    assert keys == {
        "axes-username": "username",
        "axes-ip": "ip",
        "axes-ip-header-user-agent": "ip+header:User-Agent",
    }
    assert Policy.objects.get(name="axes-username").reset_on_success
    assert not Policy.objects.get(name="axes-ip").reset_on_success  # no account to clear
    assert Policy.objects.get(name="axes-ip").overrides.get().limit == 0


def test_what_policies_cannot_hold_is_reported_and_not_written(axes_site):
    axes_site.AXES_LOCKOUT_PARAMETERS = [["username", "ip_address", "user_agent"]]
    out = run("adopt")
    assert "skipped: AXES_LOCKOUT_PARAMETERS entry" in out
    axes_site.AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
    axes_site.AXES_COOLOFF_TIME = f"{__name__}.cooloff_of_request"
    out = run("adopt")
    assert "skipped: AXES_COOLOFF_TIME:" in out
    assert not Policy.objects.exists()


def test_a_site_without_axes_adopts_nothing_of_it(settings):
    assert "axes" not in run("adopt")
    assert not Policy.objects.exists()
