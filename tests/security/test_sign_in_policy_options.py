"""django-axes parity for sign-in policies, each replayed against the real Redis:
``reset_on_success`` (AXES_RESET_ON_SUCCESS), ``extend_lockout``
(AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT), a lockout until lifted, and a block-list
(AXES_IP_BLACKLIST): an override of limit 0 for an address, a network or a username, which
denies with no Redis call, as an exemption admits with none."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import Client

from ratelimits.engine.policy.rules import UNTIL_LIFTED
from ratelimits.models import Policy, PolicyOverride
from tests.helpers import create_policy, decide_calls, run

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.auth_urls")]

IP1, IP2 = "203.0.113.1", "198.51.100.7"


@pytest.fixture(autouse=True)
def _site(settings: Any) -> None:
    settings.AUTHENTICATION_BACKENDS = [
        "ratelimits.backends.RateLimitBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    User.objects.create_user("alice", password="alice-password")
    User.objects.create_user("bob", password="bob-password")


def sign_in(username: str, password: str, ip: str = IP1) -> Any:
    data = {"username": username, "password": password}
    return Client().post("/accounts/login/", data, REMOTE_ADDR=ip)


def statuses(*attempts: tuple[str, str]) -> list[int]:
    return [sign_in(username, password).status_code for username, password in attempts]


def sign_in_policy(name: str = "signin", key: str = "username", **fields: Any) -> Policy:
    fields.setdefault("limit", 3)
    fields.setdefault("window", 900)
    return create_policy(name, "*", key=key, counts="sign_in_failures", **fields)


WRONG, RIGHT = ("alice", "guess"), ("alice", "alice-password")


def unsaved_sign_in_policy(**fields: Any) -> Policy:
    """A sign-in policy that is not saved (3 failures per username a minute, on every
    path), with ``fields`` over those: for the model's validation."""
    defaults = {"key": "username", "counts": "sign_in_failures"}
    return Policy(name="p", endpoint="*", limit=3, window=60, **{**defaults, **fields})


# -- reset on success -------------------------------------------------------------------


def test_a_success_clears_the_accounts_failures_with_reset_on_success():
    sign_in_policy(reset_on_success=True)
    assert statuses(WRONG, WRONG, RIGHT, WRONG, WRONG, RIGHT) == [200, 200, 302] * 2
    # After the last success, three failures again before the limit.
    assert statuses(WRONG, WRONG, WRONG, RIGHT) == [200, 200, 200, 429]


def test_without_it_a_success_gives_back_only_its_own_unit():
    sign_in_policy()
    assert statuses(WRONG, WRONG, RIGHT, WRONG, RIGHT) == [200, 200, 302, 200, 429]


def test_reset_on_success_clears_the_username_and_the_pair_keys(redis_client):
    sign_in_policy("signin-username", reset_on_success=True)
    sign_in_policy("signin-pair", key="username+ip", reset_on_success=True)
    sign_in_policy("signin-ip", key="ip", limit=10)
    statuses(WRONG, WRONG)
    assert len(redis_client.keys("*signin-username*")) == 1
    assert len(redis_client.keys("*signin-pair*")) == 1
    assert statuses(RIGHT) == [302]
    assert redis_client.keys("*signin-username*") == []
    assert redis_client.keys("*signin-pair*") == []
    # An address policy is not the account's: its failures stay.
    assert len(redis_client.keys("*signin-ip*")) == 1


def test_reset_on_success_is_only_for_a_policy_counting_an_account():
    for fields in ({"key": "ip"}, {"key": "user", "counts": "all"}):
        policy = unsaved_sign_in_policy(reset_on_success=True, **fields)
        with pytest.raises(ValidationError, match="account whose failures"):
            policy.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        sign_in_policy(key="ip", reset_on_success=True)


# -- an extended lockout ----------------------------------------------------------------


@pytest.mark.parametrize("extend", [True, False])
def test_an_attempt_during_an_extended_lockout_starts_it_again(redis_client, extend: bool):
    sign_in_policy(limit=1, lockout=900, extend_lockout=extend)
    assert statuses(WRONG, WRONG) == [429, 429]  # the second starts the lock
    (lock,) = redis_client.keys("*signin:lock")
    time.sleep(1.2)
    refused = sign_in(*RIGHT)
    assert refused.status_code == 429
    left = redis_client.pttl(lock)
    if extend:
        assert left > 899_500 and int(refused["Retry-After"]) == 900
    else:
        assert left < 899_000 and int(refused["Retry-After"]) < 900


def test_extend_lockout_needs_a_lockout_of_some_seconds():
    policy = unsaved_sign_in_policy(extend_lockout=True)
    with pytest.raises(ValidationError, match="Only a lockout can be extended"):
        policy.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        sign_in_policy(extend_lockout=True)


# -- a lockout until lifted -------------------------------------------------------------


def test_a_lockout_until_lifted_holds_until_an_operator_lifts_it(redis_client):
    # A window of a few seconds: the third attempt must come while it holds the first two,
    # however slow the machine; then it passes, and only the lock refuses.
    sign_in_policy(limit=2, window=3, lockout_until_lifted=True)
    answered = [sign_in(*WRONG) for _ in range(2)]
    assert [a.status_code for a in answered] == [200, 429]
    assert int(answered[1]["Retry-After"]) == UNTIL_LIFTED
    assert sign_in(*WRONG).status_code == 429  # starts the lock
    (lock,) = redis_client.keys("*signin:lock")
    # Every key keeps a TTL: the lock's is ten years.
    assert UNTIL_LIFTED - 5 < redis_client.ttl(lock) <= UNTIL_LIFTED
    time.sleep(3.1)  # the window has passed: only the lock refuses now
    assert sign_in(*RIGHT).status_code == 429
    run("reset", "--policy", "signin", "--identity", "username:alice", "--yes")
    assert sign_in(*RIGHT).status_code == 302


def test_a_new_password_lifts_a_lockout_until_lifted():
    sign_in_policy(limit=1, lockout_until_lifted=True)
    assert statuses(WRONG, WRONG) == [429, 429]
    alice = User.objects.get(username="alice")
    alice.set_password("new-alice-password")
    alice.save()
    assert statuses(("alice", "new-alice-password")) == [302]


def test_a_lockout_until_lifted_has_no_seconds_of_its_own():
    policy = unsaved_sign_in_policy(lockout=60, lockout_until_lifted=True)
    with pytest.raises(ValidationError, match="until it is lifted"):
        policy.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        sign_in_policy(lockout=60, lockout_until_lifted=True)


# -- the block-list ---------------------------------------------------------------------


def block(policy: Policy, identity: str) -> PolicyOverride:
    override = PolicyOverride(policy=policy, identity=identity, limit=0, comment="blocked")
    override.full_clean()
    override.save()
    return override


def test_a_blocked_address_is_refused_without_a_redis_call(redis_client):
    policy = sign_in_policy(key="ip", limit=50)
    assert str(block(policy, "203.0.113.1")).endswith("blocked")
    sign_in("bob", "guess", IP2)  # the table is loaded, the library too
    before = decide_calls(redis_client)
    refused = sign_in(*RIGHT, ip=IP1)
    assert refused.status_code == 429 and int(refused["Retry-After"]) == 900
    assert decide_calls(redis_client) == before
    assert sign_in("bob", "bob-password", IP2).status_code == 302


def test_a_blocked_network_is_refused_under_the_pair_key():
    policy = sign_in_policy(key="username+ip")
    block(policy, "203.0.113.0/24")
    assert statuses(RIGHT, ("bob", "bob-password")) == [429, 429]
    assert sign_in("alice", "alice-password", IP2).status_code == 302


def test_a_blocked_username_is_refused_under_every_spelling():
    policy = sign_in_policy()
    override = block(policy, "username:Alice")
    assert override.identity.startswith("n:") and "alice" not in override.identity.lower()
    assert statuses(RIGHT, ("ALICE", "alice-password")) == [429, 429]
    assert statuses(("bob", "bob-password")) == [302]


def test_a_username_is_refused_where_the_policy_counts_no_username():
    policy = sign_in_policy(key="ip")
    override = PolicyOverride(policy=policy, identity="username:alice", limit=0)
    with pytest.raises(ValidationError, match="counted only by sign-in policies"):
        override.full_clean()


def test_a_shadow_block_denies_nothing():
    policy = sign_in_policy(key="ip", mode="shadow")
    block(policy, IP1)
    assert statuses(RIGHT) == [302]


# -- policy files -----------------------------------------------------------------------


def test_export_and_import_carry_the_options_and_the_block(tmp_path):
    policy = sign_in_policy(
        key="username+ip", lockout=900, extend_lockout=True, reset_on_success=True
    )
    block(policy, "198.51.100.0/24")
    sign_in_policy("forever", limit=5, lockout_until_lifted=True)
    path = tmp_path / "policies.json"
    run("export", str(path))
    exported = path.read_text()
    assert '"extend_lockout": true' in exported and '"lockout_until_lifted": true' in exported
    Policy.objects.all().delete()
    run("import", str(path))
    again = Policy.objects.get(name="signin")
    assert (again.extend_lockout, again.reset_on_success, again.lockout) == (True, True, 900)
    assert Policy.objects.get(name="forever").lockout_until_lifted
    (override,) = again.overrides.all()
    assert (override.identity, override.limit) == ("ip:198.51.100.0/24", 0)


def test_the_admin_edits_the_options_and_a_block(admin_client):
    policy = sign_in_policy(key="username+ip", lockout=900)
    page = admin_client.get(f"/admin/ratelimits/policy/{policy.pk}/change/")
    assert page.status_code == 200
    for name in ("lockout_until_lifted", "extend_lockout", "reset_on_success"):
        assert f'name="{name}"' in page.content.decode()
    block(policy, "username:mallory")
    listed = admin_client.get(f"/admin/ratelimits/policy/{policy.pk}/change/").content.decode()
    assert "username (hashed" in listed
