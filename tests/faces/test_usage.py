"""``GET /ratelimits/usage/``: the caller's own numbers under each policy that counts it,
read without spending, through the test client, the middleware and the real Redis; a
session, a DRF token and a django-ninja API key each see their own."""

from __future__ import annotations

import datetime as dt
import math
import time
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.authtoken.models import Token

from ratelimits.engine.limiter import Check, decide
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.models import PolicyOverride
from ratelimits.testutils import free_port
from tests.helpers import caches_at, create_policy, decide_calls, logged_in, ratelimits_settings

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.usage_urls")]

USAGE = "/ratelimits/usage/"
ANONYMOUS = "ip:127.0.0.1"
#: DRF's authentication with tokens besides the session (the demo's settings have none).
WITH_TOKENS = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ]
}


def usage(client: Any, url: str = USAGE, **extra: Any) -> dict[str, dict[str, Any]]:
    """The usage endpoint's entries by policy name (it must answer 200)."""
    response = client.get(url, **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert list(body) == ["policies"]
    return {entry["name"]: entry for entry in body["policies"]}


def spend(client: Any, times: int, url: str = "/spend/", **extra: Any) -> list[int]:
    return [client.get(url, **extra).status_code for _ in range(times)]


def snapshot(redis_client: Any) -> dict[bytes, bytes]:
    """Every key in Redis with its serialized value."""
    return {key: redis_client.dump(key) for key in redis_client.keys("*")}


@pytest.fixture
def bob() -> User:
    return User.objects.create_user("bob")


# --- spends nothing ---------------------------------------------------------------------------


def test_reading_the_usage_spends_nothing(client, redis_client):
    create_policy("spend", "spend", limit=2)
    assert spend(client, 1) == [200]
    before = snapshot(redis_client)
    for _ in range(5):
        entry = usage(client)["spend"]
        assert (entry["used"], entry["remaining"], entry["limit"]) == (1, 1, 2)
    assert snapshot(redis_client) == before
    assert spend(client, 2) == [200, 429]  # the second unit was still there


def test_all_the_policies_are_read_in_one_call_per_hash_slot(alice, redis_client, backend):
    """A session user counted as the user by two policies, one of them with a lockout
    (read with and without its lock), and by a sharded one (each shard a key of its
    own), and as its address by a fourth: one call on a server; on a cluster one per
    hash slot these keys fall in."""
    policies = [
        create_policy("by-user", "spend", limit=5),
        create_policy("locked", "api:login", limit=5, lockout=60),
        create_policy("sharded", "/spend/", limit=9, shards=3, algorithm="fixed_window"),
        create_policy("by-ip", "api:search", limit=5, key="ip"),
    ]
    as_alice = logged_in(alice)
    assert spend(as_alice, 2) == [200] * 2
    calls = decide_calls(redis_client)
    entries = usage(as_alice)
    identities = [f"u:{alice.pk}"] * 3 + [ANONYMOUS]
    keys = {
        compiled.key_for(identity, shard)
        for policy, identity in zip(policies, identities, strict=True)
        for compiled in [CompiledPolicy.from_model(policy)]
        for shard in range(compiled.shards)
    }
    slots = len({redis_client.keyslot(key) for key in keys}) if backend == "cluster" else 1
    assert decide_calls(redis_client) - calls == slots
    assert {name: entry["used"] for name, entry in entries.items()} == {
        "by-user": 2,
        "locked": 0,
        "sharded": 2,
        "by-ip": 0,
    }


# --- only the caller ----------------------------------------------------------------------------


def test_each_client_sees_only_its_own_numbers(client, alice, bob):
    create_policy("spend", "spend", limit=5)
    create_policy("members", "api:items", limit=5, key="user")
    as_alice, as_bob = logged_in(alice), logged_in(bob)
    assert spend(as_alice, 3) == [200] * 3
    assert spend(as_bob, 1) == [200]
    assert spend(client, 2, REMOTE_ADDR="198.51.100.7") == [200] * 2

    mine = usage(as_alice)["spend"]
    assert (mine["used"], mine["remaining"], mine["counted_as"]) == (3, 2, "user")
    assert usage(as_bob)["spend"]["used"] == 1
    assert usage(client, REMOTE_ADDR="198.51.100.7")["spend"]["used"] == 2
    anonymous = usage(client)  # another address: nothing spent there
    assert (anonymous["spend"]["used"], anonymous["spend"]["counted_as"]) == (0, "ip")
    # A user policy does not count an anonymous client: not listed for it.
    assert "members" in usage(as_alice)
    assert "members" not in anonymous


def test_a_drf_token_sees_its_users_numbers(client, bob):
    create_policy("spend", "/*spend/", limit=5)
    token = Token.objects.create(user=bob).key
    authorization = {"HTTP_AUTHORIZATION": f"Token {token}"}
    assert spend(client, 3, "/drf/spend/", **authorization) == [200] * 3
    with override_settings(REST_FRAMEWORK=WITH_TOKENS):
        mine = usage(client, **authorization)["spend"]
        assert (mine["used"], mine["counted_as"]) == (3, "user")
        # The same address without the token: the anonymous count, untouched by bob's.
        assert usage(client)["spend"]["used"] == 0
    # Without TokenAuthentication in DRF's settings the token is not read.
    assert usage(client, **authorization)["spend"]["counted_as"] == "ip"


def test_a_ninja_api_key_sees_its_own_numbers_from_a_ninja_operation(client):
    create_policy("keyed", "usage-ninja:ninja_spend", limit=4, key="user")
    key_one, key_two = {"HTTP_X_API_KEY": "key-one"}, {"HTTP_X_API_KEY": "key-two"}
    assert spend(client, 3, "/ninja/spend", **key_one) == [200] * 3
    mine = usage(client, "/ninja/usage", **key_one)["keyed"]
    assert (mine["used"], mine["remaining"], mine["counted_as"]) == (3, 1, "api client")
    assert usage(client, "/ninja/usage", **key_two)["keyed"]["used"] == 0
    assert client.get("/ninja/usage").status_code == 401  # ninja's auth, as for any operation
    assert "keyed" not in usage(client)  # the plain endpoint knows no ninja key


def test_a_header_policy_is_listed_when_the_request_carries_the_header(client):
    create_policy("by-key", "spend", limit=5, key="header:X-Api-Key")
    assert spend(client, 2, HTTP_X_API_KEY="secret-one") == [200] * 2
    entry = usage(client, HTTP_X_API_KEY="secret-one")["by-key"]
    assert (entry["used"], entry["counted_as"]) == (2, "header")
    assert usage(client, HTTP_X_API_KEY="secret-two")["by-key"]["used"] == 0
    assert "by-key" not in usage(client)


def test_global_shadow_and_exempt_policies_are_left_out(client, alice, settings):
    create_policy("everyone", "spend", limit=5, key="global")
    create_policy("trial", "spend", limit=5, mode="shadow")
    exempted = create_policy("staff", "spend", limit=5)
    PolicyOverride.objects.create(policy=exempted, user=alice, exempt=True)
    create_policy("counted", "spend", limit=5)
    assert set(usage(logged_in(alice))) == {"counted"}
    assert set(usage(client)) == {"counted", "staff"}
    settings.RATELIMITS = ratelimits_settings(EXEMPT_NETWORKS=["127.0.0.0/8"])
    assert usage(client) == {}


# --- overrides, shards, calendars and lockouts ------------------------------------------------


def test_the_callers_override_applies(client, alice, bob):
    policy = create_policy("spend", "spend", limit=2)
    PolicyOverride.objects.create(policy=policy, user=alice, limit=10)
    as_alice = logged_in(alice)
    assert spend(as_alice, 3) == [200] * 3
    mine = usage(as_alice)["spend"]
    assert (mine["limit"], mine["used"], mine["remaining"]) == (10, 3, 7)
    theirs = usage(logged_in(bob))["spend"]
    assert (theirs["limit"], theirs["used"], theirs["remaining"]) == (2, 0, 2)


def test_a_sharded_policy_shows_its_whole_limit_and_every_shards_count(client):
    policy = create_policy("sharded", "spend", limit=10, shards=2, algorithm="fixed_window")
    compiled = CompiledPolicy.from_model(policy)
    for shard in (0, 0, 0, 1, 1):
        assert decide([Check(compiled, ANONYMOUS, shard)]).allowed
    entry = usage(client)["sharded"]
    assert (entry["limit"], entry["used"], entry["remaining"]) == (10, 5, 5)


def local_midnight_of_next_month(zone: str) -> dt.datetime:
    now = dt.datetime.now(ZoneInfo(zone))
    return dt.datetime(now.year + now.month // 12, now.month % 12 + 1, 1, tzinfo=ZoneInfo(zone))


@pytest.mark.parametrize("zone", ["Pacific/Auckland", "America/New_York"])
def test_a_monthly_quota_resets_at_the_first_in_its_zone(client, zone):
    create_policy(
        "quota", "spend", limit=1000, algorithm="fixed_window", calendar="month", time_zone=zone
    )
    assert spend(client, 2) == [200] * 2
    entry = usage(client)["quota"]
    first = local_midnight_of_next_month(zone)
    assert entry["resets_at"] == first.isoformat()
    assert abs(entry["reset"] - math.ceil(first.timestamp() - time.time())) <= 2
    assert (entry["calendar"], entry["time_zone"], entry["window"]) == ("month", zone, 30 * 86400)
    assert (entry["used"], entry["remaining"], entry["retry_after"]) == (2, 998, 0)


def test_a_lockout_is_shown_once_it_holds_the_client_out(client):
    create_policy("sign-in", "spend", limit=1, window=60, lockout=600)
    assert spend(client, 1) == [200]
    full = usage(client)["sign-in"]  # out of units, but no denial yet: no lockout
    assert (full["remaining"], full["locked_out"], full["lockout"]) == (0, False, 600)
    assert full["lockout_until_lifted"] is False
    assert 58 <= full["retry_after"] <= 60
    assert spend(client, 1) == [429]  # the first denial locks the client out
    locked = usage(client)["sign-in"]
    assert (locked["remaining"], locked["locked_out"]) == (0, True)
    assert 598 <= locked["retry_after"] <= 600


def test_a_lockout_until_lifted_says_so(client):
    """A lock until lifted has no length (its lockout is 0): the entry says it lasts until
    an operator lifts it, and the retry time while it holds is the lock's ten years."""
    create_policy("sign-in", "spend", limit=1, window=60, lockout_until_lifted=True)
    assert spend(client, 2) == [200, 429]
    locked = usage(client)["sign-in"]
    assert (locked["lockout"], locked["lockout_until_lifted"], locked["locked_out"]) == (
        0,
        True,
        True,
    )
    assert locked["retry_after"] > 9 * 365 * 86400


@pytest.mark.parametrize(
    ("lockout", "admitted_ago", "denied_ago"),
    [(600, 120, 120), (30, 65, 10)],  # locked out until +480 s, and until +20 s
    ids=["longer than the window", "shorter than the window"],
)
def test_a_lockout_is_shown_while_it_holds_out_a_client_its_count_would_admit(
    client, lockout, admitted_ago, denied_ago
):
    """The request admitted left the window (60 s); the lock started by the denial
    after it still holds, whether it is longer than the window or not."""
    policy = create_policy("sign-in", "spend", limit=1, window=60, lockout=lockout)
    compiled = CompiledPolicy.from_model(policy)
    now = time.time()
    admitted = decide([Check(compiled, ANONYMOUS)], now=now - admitted_ago)
    denied = decide([Check(compiled, ANONYMOUS)], now=now - denied_ago)
    assert (admitted.allowed, denied.allowed) == (True, False)
    entry = usage(client)["sign-in"]
    assert (entry["used"], entry["remaining"], entry["locked_out"]) == (0, 0, True)
    left = lockout - denied_ago
    assert left - 3 <= entry["retry_after"] <= left + 1
    assert spend(client, 1) == [429]


# --- Redis down, and a policy on the usage view itself ----------------------------------------


def test_redis_down_answers_503_with_a_json_error(client):
    create_policy("spend", "spend", limit=5)
    usage(client)  # the policy table, built while Redis answers
    with override_settings(CACHES=caches_at(free_port())):
        responses = [client.get(USAGE) for _ in range(3)]  # the breaker opens on the way
    assert [response.status_code for response in responses] == [503] * 3
    assert all("detail" in response.json() for response in responses)
    assert {response["Retry-After"] for response in responses} == {"1"}  # BREAKER_COOLDOWN
    # Back when Redis is, once the breaker tries it again (BREAKER_COOLDOWN, 1 s).
    deadline = time.monotonic() + 30
    while (answer := client.get(USAGE)).status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert answer.status_code == 200
    assert answer.json()["policies"][0]["used"] == 0


def test_a_policy_on_the_usage_view_limits_it(client):
    create_policy("usage", "ratelimits:usage", limit=2)
    first = usage(client)["usage"]
    assert (first["used"], first["remaining"]) == (1, 1)  # this request is counted, once
    assert usage(client)["usage"]["remaining"] == 0
    denied = client.get(USAGE)
    assert denied.status_code == 429
    assert 1 <= int(denied["Retry-After"]) <= 60


def test_a_policy_on_the_usage_view_counts_a_token_as_its_user(client, bob):
    """The view's policy is decided after DRF's authentication: a user policy counts the
    token's user (the middleware alone would see an anonymous request)."""
    create_policy("usage", "ratelimits:usage", limit=1, key="user")
    authorization = {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=bob).key}"}
    with override_settings(REST_FRAMEWORK=WITH_TOKENS):
        assert client.get(USAGE, **authorization).status_code == 200
        assert client.get(USAGE, **authorization).status_code == 429
        assert [client.get(USAGE).status_code for _ in range(3)] == [200] * 3
