"""``manage.py ratelimits reset --identity X`` without ``--policy``: X's keys in every policy
that counts it, alone or in a pair (``username+ip``), its locks lifted and announced
(``lockout_lifted``), with a dry run, a confirmation and JSON. Keys made by real sign-ins."""

from __future__ import annotations

import json
import sys
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from ratelimits.engine.keys.identity import username_identity
from ratelimits.engine.keys.kinds import pair_parts
from ratelimits.signals import lockout_lifted
from tests.cli.traffic import all_keys, refused
from tests.helpers import create_policy, run

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.auth_urls")]

BACKENDS = ["ratelimits.backends.RateLimitBackend", "django.contrib.auth.backends.ModelBackend"]
HOME, NEIGHBOUR, AWAY = "203.0.113.7", "203.0.113.70", "198.51.100.9"


@pytest.fixture
def locked(settings: Any, redis_client: Any) -> set[str]:
    """alice locked out by the pair at HOME (her second failure there), then by the
    username policy (her fourth counted failure, from elsewhere); bob counted at HOME and
    at NEIGHBOUR. Returns every key."""
    settings.AUTHENTICATION_BACKENDS = BACKENDS
    User.objects.create_user("alice", password="right")
    sign_in = {"window": 600, "counts": "sign_in_failures", "fail_open": False}
    create_policy("by-username", "*", limit=3, key="username", lockout=900, **sign_in)
    create_policy("by-pair", "*", limit=1, key="username+ip", lockout=900, **sign_in)
    create_policy("by-address", "*", limit=50, key="ip", **sign_in)
    alice = [HOME, HOME, AWAY, "192.0.2.1", "192.0.2.2", "192.0.2.3"]
    attempts = [("alice", address) for address in alice] + [("bob", HOME), ("bob", NEIGHBOUR)]
    for username, address in attempts:
        data = {"username": username, "password": "guess"}
        Client().post("/accounts/login/", data, REMOTE_ADDR=address)
    keys = all_keys(redis_client)
    assert f"rl:{{{username_identity('alice')}}}:by-username:lock" in keys
    assert f"rl:{{{username_identity('alice')}+ip:{HOME}}}:by-pair:lock" in keys
    return keys


def holding(keys: set[str], identity: str) -> set[str]:
    """The keys whose identity is, or pairs, ``identity``."""
    tagged = {key: key.split("{")[1].split("}")[0] for key in keys if "{" in key}
    return {key for key, tag in tagged.items() if identity in pair_parts(tag)}


def test_an_address_is_reset_in_every_policy_and_its_pairs(locked, redis_client):
    mine = holding(locked, f"ip:{HOME}")
    # The address policy's key, and the pairs of alice and bob at HOME (with a lock).
    assert {key.split("}:")[1] for key in mine} == {
        "by-address:log",
        "by-pair:log",
        "by-pair:lock",
    }
    assert len(mine) == 4  # by-address, alice's pair (log, lock), bob's pair

    text = run("reset", "--identity", f"ip:{HOME}", "--dry-run")
    assert text.splitlines() == [
        *sorted(mine),
        f"Dry run: would delete 4 keys in 2 policies for identity ip:{HOME}, lifting 1 lockout.",
    ]
    assert all_keys(redis_client) == locked

    lifted: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        lifted.append(kwargs)

    lockout_lifted.connect(receiver, weak=False)
    try:
        text = run("reset", "--identity", HOME, "--yes")
    finally:
        lockout_lifted.disconnect(receiver)
    assert text.splitlines()[-1] == (
        f"Deleted 4 keys in 2 policies for identity ip:{HOME}, lifting 1 lockout."
    )
    # Exactly those: the neighbour (a longer address with the same start), the username
    # policy's lock and the other addresses are kept.
    assert all_keys(redis_client) == locked - mine
    assert holding(all_keys(redis_client), f"ip:{NEIGHBOUR}")
    assert [(x["policy"], x["lifted"]) for x in lifted] == [("by-pair", HOME)]  # as typed
    assert lifted[0]["identity"] == f"{username_identity('alice')}+ip:{HOME}"


def test_a_username_is_reset_in_every_policy_and_its_pairs(locked, redis_client):
    alice = username_identity("alice")
    mine = holding(locked, alice)
    # by-username (log, lock), the pairs at HOME (log, lock), AWAY and 192.0.2.1
    assert len(mine) == 6
    out = run("reset", "--identity", "username:Alice", "--yes", "--json")
    record = json.loads(out)
    assert record["identities"] == [alice]
    assert record["policies"] == ["by-pair", "by-username"]
    assert record["lockouts"] == 2 and record["deleted"] == 6
    assert sorted(record["keys"]) == sorted(mine)
    assert all_keys(redis_client) == locked - mine
    # alice signs in again at once.
    response = Client().post(
        "/accounts/login/", {"username": "alice", "password": "right"}, REMOTE_ADDR=HOME
    )
    assert response.status_code == 302


def test_confirmation_and_bad_input(locked, redis_client, monkeypatch):
    monkeypatch.setattr(sys, "stdin", StringIO(""))
    message = refused("reset", "--identity", f"ip:{HOME}")
    assert message.startswith(f"Delete 4 keys in 2 policies for identity ip:{HOME}?")
    assert all_keys(redis_client) == locked
    assert refused("reset", "--identity", "no such thing").startswith("--identity: ")
    assert refused("reset") == "Name a --policy, an --identity, or both."
    assert run("reset", "--identity", "192.0.2.200", "--yes") == (
        "No keys for identity ip:192.0.2.200.\n"
    )
