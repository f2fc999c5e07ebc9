"""``keys`` and ``inspect`` with overrides: each client's key is read under the limit that
applies to it, as the request path decides, and says which override applied. The traffic
is real requests to the demo's ``/api/search/`` (DRF, ``throttle_scope = "search"``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.http import HttpResponse
from django.test import Client

from ratelimits.models import Policy, PolicyOverride
from ratelimits.testutils import reset_state
from tests.helpers import cells, logged_in, run, run_json

pytestmark = pytest.mark.django_db

KEYS = ["key", "policy", "identity", "algorithm", "count", "limit", "remaining", "ttl"]
KEYS += ["memory", "override"]


def search(client: Client, times: int) -> HttpResponse:
    """``times`` requests to /api/search/; the last response."""
    for _ in range(times):
        response = client.get("/api/search/")
    return response


@pytest.fixture
def site() -> dict[str, Any]:
    """``search``: 3 per 60 s by user or address; bob's override gives him 6, the
    partners group (alice) 6, the 203.0.113.0/24 network 6; the staff group (carol) is
    exempt."""
    bob = User.objects.create_user("bob")
    alice = User.objects.create_user("alice")
    carol = User.objects.create_user("carol")
    alice.groups.add(Group.objects.create(name="partners"))
    carol.groups.add(Group.objects.create(name="staff"))
    policy = Policy.objects.create(
        name="search", endpoint="search", algorithm="sliding_log", limit=3, window=60
    )
    PolicyOverride.objects.create(policy=policy, user=bob, limit=6)
    PolicyOverride.objects.create(policy=policy, group=Group.objects.get(name="partners"), limit=6)
    PolicyOverride.objects.create(policy=policy, identity="203.0.113.0/24", limit=6)
    reset_state()
    return {"bob": bob, "alice": alice, "carol": carol, "policy": policy}


def key_of(user: User) -> str:
    return f"rl:{{u:{user.pk}}}:search:log"


def test_keys_json_shows_the_overrides_limit_and_what_is_left(site):
    bob = site["bob"]
    response = search(logged_in(bob), 5)
    assert response.status_code == 200
    assert response["RateLimit"].startswith('"search";r=1;')  # what the server told bob
    (record,) = run_json("keys", "--identity", "user:bob")
    assert record["key"] == key_of(bob)
    assert (record["count"], record["limit"], record["remaining"]) == (5, 6, 1)
    assert (record["override"], record["exempt"]) == ("user bob", False)


def test_keys_table_shows_the_overrides_limit_and_names_it(site):
    bob = site["bob"]
    search(logged_in(bob), 5)
    search(Client(REMOTE_ADDR="198.51.100.1"), 2)  # a client no override names
    lines = run("keys").splitlines()
    rows = {cells(line)[0]: cells(line) for line in lines[1:-1]}
    assert rows[key_of(bob)][4:7] == ["5", "6", "1"]
    assert cells(lines[0]) == KEYS
    assert rows[key_of(bob)][-1] == "user bob"
    plain = rows["rl:{ip:198.51.100.1}:search:log"]
    assert plain[4:7] == ["2", "3", "1"] and plain[-1] == "-"


def test_inspect_by_key_and_by_policy_and_identity_count_against_the_override(site):
    bob = site["bob"]
    search(logged_in(bob), 5)
    for args in (
        ("inspect", key_of(bob)),
        ("inspect", "--policy", "search", "--identity", "user:bob"),
    ):
        text = run(*args)
        lines = dict(line.split(None, 1) for line in text.splitlines()[:10] if line.strip())
        assert lines["key"] == key_of(bob)
        assert lines["policy"] == "search: sliding_log, 3 per 60 s, enforce"
        assert lines["count"] == "5 of 6"
        assert lines["next"] == "allowed; 1 left now"
        assert lines["override"] == "user bob: 6 per 60 s"
        record = run_json(*args)
        assert {k: record[k] for k in ("count", "limit", "remaining", "allowed")} == {
            "count": 5,
            "limit": 6,
            "remaining": 1,
            "allowed": True,
        }
        assert (record["override"], record["exempt"]) == ("user bob", False)


def test_a_user_overridden_through_a_group(site):
    alice = site["alice"]
    assert search(logged_in(alice), 5)["RateLimit"].startswith('"search";r=1;')
    (record,) = run_json("keys", "--identity", "user:alice")
    assert (record["limit"], record["remaining"]) == (6, 1)
    assert record["override"] == "group partners"
    text = run("inspect", "--policy", "search", "--identity", "user:alice")
    assert "count      5 of 6\n" in text and "next       allowed; 1 left now\n" in text
    assert "override   group partners: 6 per 60 s\n" in text
    detail = run_json("inspect", key_of(alice))
    assert (detail["limit"], detail["remaining"]) == (6, 1)
    assert detail["override"] == "group partners"


def test_an_address_overridden_through_a_network(site):
    search(Client(REMOTE_ADDR="203.0.113.9"), 5)
    (record,) = run_json("keys", "--identity", "203.0.113.9")
    assert (record["limit"], record["remaining"]) == (6, 1)
    assert record["override"] == "203.0.113.0/24"
    text = run("inspect", "--policy", "search", "--identity", "203.0.113.9")
    assert "count      5 of 6\n" in text
    assert "override   203.0.113.0/24: 6 per 60 s\n" in text


def test_an_exempt_client_is_shown_as_exempt(site):
    carol = site["carol"]
    search(logged_in(carol), 2)  # counted: staff is not exempt yet
    PolicyOverride.objects.create(
        policy=site["policy"], group=Group.objects.get(name="staff"), exempt=True
    )
    (record,) = run_json("keys", "--identity", "user:carol")
    assert (record["count"], record["limit"], record["remaining"]) == (None, None, None)
    assert (record["override"], record["exempt"]) == ("group staff", True)
    lines = run("keys", "--identity", "user:carol").splitlines()
    assert cells(lines[0]) == KEYS
    assert cells(lines[1])[4:7] == ["-", "-", "-"]
    assert cells(lines[1])[-1] == "exempt (group staff)"
    text = run("inspect", key_of(carol))
    assert "override   exempt (group staff): not counted\n" in text
    assert "next       allowed; exempt, not counted\n" in text
    assert "count " not in text
    detail = run_json("inspect", "--policy", "search", "--identity", "user:carol")
    assert (detail["exempt"], detail["override"], detail["allowed"]) == (True, "group staff", True)
    assert (detail["limit"], detail["count"]) == (None, None)


def test_without_an_override_nothing_is_said_of_one(site):
    search(Client(REMOTE_ADDR="198.51.100.1"), 2)
    assert "override" not in run("keys").splitlines()[0]
    text = run("inspect", "--policy", "search", "--identity", "198.51.100.1")
    assert "override" not in text and "count      2 of 3\n" in text
    (record,) = run_json("keys")
    assert (record["limit"], record["override"], record["exempt"]) == (3, None, False)


def test_a_sharded_policy_under_an_override_with_fewer_shards(site):
    """An override's limit below the policy's shards leaves fewer (here none): the client's
    key is read under the override, not called a leftover of the policy's shards."""
    Policy.objects.filter(name="search").update(limit=4, shards=2)
    PolicyOverride.objects.filter(user=site["bob"]).update(limit=1)
    reset_state()
    bob = site["bob"]
    assert search(logged_in(bob), 1).status_code == 200
    (record,) = run_json("keys", "--identity", "user:bob")
    assert (record["key"], record["shard"]) == (key_of(bob), None)
    assert (record["count"], record["limit"], record["remaining"], record["note"]) == (1, 1, 0, "")
    text = run("inspect", "--policy", "search", "--identity", "user:bob")
    assert text.startswith(f"key        {key_of(bob)}\n")
    assert "count      1 of 1\n" in text
