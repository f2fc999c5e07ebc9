"""``manage.py ratelimits check`` and ``policies`` with overrides: the limit that applies
to the probed client, which override gave it, and exemptions, against the real Redis."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.contrib.auth.models import Group, User

from ratelimits.models import Policy, PolicyOverride
from ratelimits.testutils import reset_state
from tests.helpers import DECIDE_COMMANDS, cells, hashed, run, run_json, use

pytestmark = pytest.mark.django_db

SECRET = "k3y-Of-Partner-ACME-7f2b"
COLUMNS = ["policy", "endpoint", "rate", "algorithm", "mode", "identity", "override"]
COLUMNS += ["count", "remaining", "next"]


def table(text: str) -> dict[str, list[str]]:
    """The table's rows by policy name, after checking its header."""
    lines = text.splitlines()
    assert cells(lines[1]) == COLUMNS
    return {cells(line)[0]: cells(line) for line in lines[2:] if not line.startswith("The ")}


def by_policy(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {found["policy"]: found for found in record["policies"]}


def script_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in DECIDE_COMMANDS)


@pytest.fixture
def site() -> dict[str, Any]:
    """Users in groups, and policies on /api/search/ (scope "search") with overrides."""
    alice = User.objects.create_user("alice")
    bob = User.objects.create_user("bob")
    carol = User.objects.create_user("carol")
    partners = Group.objects.create(name="partners")
    bulk = Group.objects.create(name="bulk")
    alice.groups.add(partners)
    bob.groups.add(partners, bulk)
    by_user = Policy.objects.create(
        name="by-user", endpoint="search", algorithm="sliding_log", limit=5, window=60, key="user"
    )
    by_ip = Policy.objects.create(
        name="by-ip", endpoint="search", algorithm="fixed_window", limit=10, window=60, key="ip"
    )
    by_key = Policy.objects.create(
        name="by-key",
        endpoint="search",
        algorithm="sliding_counter",
        limit=20,
        window=60,
        key="header:X-Api-Key",
        mode="shadow",
    )
    PolicyOverride.objects.create(policy=by_user, user=alice, limit=100)
    PolicyOverride.objects.create(policy=by_user, group=partners, exempt=True)  # bob, not alice
    PolicyOverride.objects.create(policy=by_user, group=bulk, limit=50)  # exempt wins for bob
    PolicyOverride.objects.create(policy=by_ip, identity="10.0.0.0/8", limit=40)
    PolicyOverride.objects.create(policy=by_ip, identity="10.1.0.0/16", exempt=True)
    PolicyOverride.objects.create(policy=by_ip, identity="10.1.2.3", limit=3)
    PolicyOverride.objects.create(policy=by_key, identity=SECRET, limit=200)
    reset_state()
    return {"alice": alice, "bob": bob, "carol": carol, "by_user": by_user, "by_ip": by_ip}


def test_each_policy_shows_the_override_that_applies(site, redis_client):
    alice = site["alice"]
    use(site["by_user"], f"u:{alice.pk}", 3)
    use(site["by_ip"], "ip:10.200.0.1", 4)
    args = ("check", "--path", "/api/search/", "--user", "alice", "--ip", "10.200.0.1")
    text = run(*args, "--header", f"X-Api-Key={SECRET}")
    rows = table(text)
    assert rows["by-user"] == [
        "by-user",
        "search",
        "100 per 60 s",
        "sliding_log",
        "enforce",
        f"u:{alice.pk}",
        "user alice",
        "3",
        "97",
        "allowed",
    ]
    assert rows["by-ip"][2] == "40 per 60 s"
    assert rows["by-ip"][5:9] == ["ip:10.200.0.1", "10.0.0.0/8", "4", "36"]
    assert rows["by-key"][2] == "200 per 60 s"
    assert rows["by-key"][4:7] == [
        "shadow",
        hashed(SECRET),
        f"API key (hashed {hashed(SECRET)[2:10]}…)",
    ]
    assert SECRET not in text
    assert text.splitlines()[-1] == "The next request would be allowed."

    record = by_policy(run_json(*args, "--header", f"X-Api-Key={SECRET}"))
    assert record["by-user"] == {
        "policy": "by-user",
        "identity": f"u:{alice.pk}",
        "enforce": True,
        "limit": 100,
        "window": 60,
        "count": 3,
        "remaining": 97,
        "allowed": True,
        "retry_after": 0,
        "override": "user alice",
        "exempt": False,
    }
    assert (record["by-ip"]["limit"], record["by-ip"]["override"]) == (40, "10.0.0.0/8")
    assert (record["by-key"]["limit"], record["by-key"]["exempt"]) == (200, False)


def test_a_client_no_override_names_gets_the_policy(site):
    args = ("check", "--path", "/api/search/", "--user", "carol", "--ip", "192.0.2.1")
    rows = table(run(*args, "--header", "X-Api-Key=another"))
    assert [rows[name][2] for name in ("by-user", "by-ip", "by-key")] == [
        "5 per 60 s",
        "10 per 60 s",
        "20 per 60 s",
    ]
    assert {rows[name][6] for name in rows} == {"-"}
    record = by_policy(run_json(*args))
    assert {(r["override"], r["exempt"]) for r in record.values()} == {(None, False)}


def test_a_group_override_applies_and_the_user_override_beats_it(site):
    """alice is in partners (exempt) but has her own override; bob's groups are partners
    (exempt) and bulk (50): the most generous, the exemption, wins."""
    record = by_policy(run_json("check", "--path", "/api/search/", "--user", "alice"))
    assert (record["by-user"]["override"], record["by-user"]["limit"]) == ("user alice", 100)
    Group.objects.get(name="partners").user_set.remove(site["bob"])
    reset_state()
    record = by_policy(run_json("check", "--path", "/api/search/", "--user", "bob"))
    assert (record["by-user"]["override"], record["by-user"]["limit"]) == ("group bulk", 50)


def test_an_exempt_client_is_not_counted_and_says_which_override(site, redis_client):
    bob = site["bob"]
    use(site["by_user"], f"u:{bob.pk}", 5)  # at the policy's limit: a check would deny
    calls = script_calls(redis_client)
    text = run("check", "--path", "/api/search/", "--user", "bob")
    rows = table(text)
    assert rows["by-user"] == [
        "by-user",
        "search",
        "-",
        "sliding_log",
        "enforce",
        f"u:{bob.pk}",
        "exempt (group partners)",
        "-",
        "-",
        "not counted: exempt",
    ]
    assert rows["by-ip"][-1] == "not counted: counts by address (give --ip)"
    assert text.splitlines()[-1] == "The next request would be allowed."
    assert script_calls(redis_client) == calls  # nothing was asked of Redis for it

    record = run_json("check", "--path", "/api/search/", "--user", "bob")
    assert record["allowed"] is True
    assert by_policy(record)["by-user"] == {
        "policy": "by-user",
        "identity": f"u:{bob.pk}",
        "enforce": True,
        "limit": None,
        "window": 60,
        "count": None,
        "remaining": None,
        "allowed": True,
        "retry_after": None,
        "override": "group partners",
        "exempt": True,
    }
    assert script_calls(redis_client) == calls


@pytest.mark.parametrize(
    ("address", "override", "limit"),
    [
        ("10.1.2.3", "10.1.2.3", 3),  # the exact address beats the networks holding it
        ("10.1.9.9", "exempt (10.1.0.0/16)", None),  # the narrowest network
        ("10.9.9.9", "10.0.0.0/8", 40),
        ("11.0.0.1", "-", 10),
    ],
)
def test_addresses_get_the_most_specific_rule(site, address, override, limit):
    rows = table(run("check", "--path", "/api/search/", "--ip", address))
    assert rows["by-ip"][6] == override
    assert rows["by-ip"][2] == ("-" if limit is None else f"{limit} per 60 s")
    found = by_policy(run_json("check", "--path", "/api/search/", "--ip", address))["by-ip"]
    assert found["limit"] == limit and found["exempt"] is (limit is None)


def test_a_hit_limit_under_an_override_denies_as_the_throttle_would(site):
    use(site["by_ip"], "ip:10.1.2.3", 3)
    text = run("check", "--path", "/api/search/", "--ip", "10.1.2.3")
    row = table(text)["by-ip"]
    assert row[2] == "3 per 60 s" and row[7:9] == ["3", "0"]
    assert row[9].startswith("denied (")
    assert "The next request would be denied by by-ip" in text


def test_exempt_networks_exempt_every_policy(site, settings):
    settings.RATELIMITS = {
        **getattr(settings, "RATELIMITS", {}),
        "EXEMPT_NETWORKS": ["192.0.2.0/24"],
    }
    args = ("check", "--path", "/api/search/", "--user", "carol", "--ip", "192.0.2.7")
    rows = table(run(*args))
    assert {rows[name][6] for name in rows} == {"exempt (EXEMPT_NETWORKS)"}
    record = by_policy(run_json(*args))
    assert {(r["override"], r["exempt"]) for r in record.values()} == {("EXEMPT_NETWORKS", True)}


def test_the_override_column_only_when_a_policy_has_overrides(site):
    Policy.objects.create(name="plain", endpoint="/api/login/", limit=5, window=60, key="ip")
    text = run("check", "--path", "/api/login/", "--ip", "192.0.2.1")
    assert cells(text.splitlines()[1]) == [c for c in COLUMNS if c != "override"]


def test_policies_lists_override_counts(site):
    Policy.objects.create(name="plain", endpoint="/plain/", limit=5, window=60)
    lines = run("policies").splitlines()
    header = cells(lines[0])
    assert "overrides" in header  # ("note" may follow: /plain/ matches nothing here)
    column = header.index("overrides")
    counts = {cells(line)[0]: cells(line)[column] for line in lines[1:]}
    assert counts == {"by-ip": "3", "by-key": "1", "by-user": "3", "plain": "0"}
    assert {r["name"]: r["overrides"] for r in run_json("policies")} == {
        "by-ip": 3,
        "by-key": 1,
        "by-user": 3,
        "plain": 0,
    }
    PolicyOverride.objects.all().delete()
    assert "overrides" not in run("policies").splitlines()[0]
