"""``manage.py ratelimits``: policies, keys, inspect, reset and check, against the real Redis.

Traffic is made with the engine (``limiter.decide``), either on the Redis clock or at
exact ``now=`` times placed relative to Redis ``TIME``, because ``keys``, ``inspect``
and ``check`` read every key at the Redis clock.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.management.base import CommandError
from django.test import RequestFactory, override_settings

from ratelimits.cli import output
from ratelimits.engine import identity, limiter
from ratelimits.engine.decision import Decision
from ratelimits.engine.keys import build_key
from ratelimits.engine.policy import CompiledPolicy
from ratelimits.engine.store import connection
from ratelimits.http import facts
from ratelimits.models import Policy
from ratelimits.testutils import free_port, reset_state
from ratelimits.tools import inspection, inventory
from ratelimits.validators import MAX_WINDOW
from tests.helpers import Terminal, cells, make_policy, run, run_json

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("backend")]

ROOT = Path(__file__).resolve().parents[2]
DAY = 24 * 3600
V4 = "ip:203.0.113.7"
SECRET = "s3cr3t-Token-VALUE"  # mixed case: a header value is not case-folded

# ---------------------------------------------------------------------------- helpers


def by_key(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found = {r["key"]: r for r in records}
    assert len(found) == len(records), "a key was listed twice"
    return found


def refused(*args: str) -> str:
    """The message of the ``CommandError`` that ``manage.py ratelimits *args`` raises."""
    with pytest.raises(CommandError) as raised:
        run(*args)
    return str(raised.value)


def row_of(text: str, first: str) -> list[str]:
    """The table row of ``text`` whose first cell is ``first``."""
    rows = [cells(line) for line in text.splitlines() if line.startswith(first + " ")]
    assert len(rows) == 1, (first, text)
    return rows[0]


def add_policy(name: str, endpoint: str | None = None, **fields: Any) -> CompiledPolicy:
    """:func:`~tests.helpers.make_policy`'s policy (sliding_log, 5 per 60 s per address)
    on ``endpoint``, by default its name, compiled after the process forgets its state."""
    row = make_policy(name, endpoint=endpoint or name, **fields)
    reset_state()
    return CompiledPolicy.from_model(row)


def hit(policy: CompiledPolicy, who: str, now: float | None = None, times: int = 1) -> None:
    """``times`` admitted requests of ``who`` (at ``now``, else on the Redis clock)."""
    for _ in range(times):
        decision = limiter.decide([limiter.Check(policy, who)], now=now).decisions[0]
        assert decision.allowed and not decision.failed


def peek(client: redis.Redis, policy: CompiledPolicy, who: str) -> Decision:
    return limiter.peek([limiter.Check(policy, who)], client)[1].decisions[0]


def redis_now_us(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1_000_000 + int(micros)


def iso(time_us: int) -> str:
    """ISO 8601 UTC to the millisecond, written independently of the command's helper."""
    whole = datetime.fromtimestamp(time_us // 1_000_000, tz=UTC)
    return whole.strftime("%Y-%m-%dT%H:%M:%S") + f".{time_us // 1000 % 1000:03d}Z"


def mid_window(now: float) -> int:
    """A window length (>= 1 day) that ``now`` is 30 to 70 % of the way through: the
    previous window's weight is far from 0 and 1, and no boundary is near."""
    for window in range(DAY, MAX_WINDOW + 1, 3600):
        if 0.3 <= (now % window) / window <= 0.7:
            return window
    raise AssertionError("no window fits")


def all_keys(client: redis.Redis) -> set[str]:
    return {k.decode() for k in client.scan_iter(count=1000)}


def dumps(client: redis.Redis, names: Any) -> dict[str, bytes | None]:
    return {name: client.dump(name) for name in names}


def scan_calls(client: Any) -> int:
    """SCAN calls served so far, by every node of a cluster."""
    return sum(
        int(node.info("commandstats").get("cmdstat_scan", {}).get("calls", 0))
        for node in connection.node_clients(client)
    )


def counter_traffic(
    client: redis.Redis, policy: CompiledPolicy, who: str, previous: int, current: int
) -> tuple[int, float]:
    """``previous`` requests in the previous window and ``current`` in this one, at exact
    times before now; returns (the current window's start, its first request's time)."""
    now = redis_now_us(client) / 1_000_000
    start = int(now // policy.window) * policy.window
    for i in range(previous):
        hit(policy, who, now=start - policy.window + 100 + i)
    elapsed = now - start
    times = [start + elapsed * k / (current + 1) for k in range(1, current + 1)]
    for at in times:
        hit(policy, who, now=at)
    return start, times[0]


def estimate(client: redis.Redis, window: int, start: int, previous: int, current: int) -> float:
    """The sliding counter's estimate at Redis now: previous x (part of it still inside
    the sliding window) + current."""
    elapsed = redis_now_us(client) / 1_000_000 - start
    return previous * (window - elapsed) / window + current


# --------------------------------------------------------------------------- policies


def test_policies_table_shows_every_row():
    add_policy("login", "api:login", methods="post", limit=5, window=60, key="ip", fail_open=False)
    add_policy(
        "search",
        algorithm="sliding_counter",
        limit=20,
        window=3600,
        key="user_or_ip",
        mode="shadow",
        enabled=False,
    )
    text = run("policies")
    lines = text.splitlines()
    assert cells(lines[0]) == [
        "name",
        "endpoint",
        "methods",
        "algorithm",
        "rate",
        "key",
        "mode",
        "fail_open",
        "enabled",
    ]
    assert cells(lines[1]) == [
        "login",
        "api:login",
        "POST",
        "sliding_log",
        "5 per 60 s",
        "ip",
        "enforce",
        "closed",
        "yes",
    ]
    assert cells(lines[2]) == [
        "search",
        "search",
        "any",
        "sliding_counter",
        "20 per 3600 s",
        "user_or_ip",
        "shadow",
        "open",
        "no",
    ]
    assert len(lines) == 3


def test_policies_json_equals_the_rows():
    add_policy("payment", "/api/payment/*", methods="POST,GET", limit=3, key="user")
    add_policy("items", "api:items", algorithm="fixed_window", limit=10, window=10, mode="shadow")
    assert run_json("policies") == [
        {
            "name": "items",
            "endpoint": "api:items",
            "methods": "",
            "algorithm": "fixed_window",
            "limit": 10,
            "window": 10,
            "key": "ip",
            "mode": "shadow",
            "fail_open": True,
            "enabled": True,
            "shards": 1,
            "burst": None,
            "cost": 1,
            "counts": "all",
            "calendar": "",
            "time_zone": "",
            "lockout": 0,
            "ipv6_prefix": None,
            "rate": "10 per 10 s",
            "overrides": 0,
            "matches_nothing": False,
            "nearest_match": None,
        },
        {
            "name": "payment",
            "endpoint": "/api/payment/*",
            "methods": "GET,POST",
            "algorithm": "sliding_log",
            "limit": 3,
            "window": 60,
            "key": "user",
            "mode": "enforce",
            "fail_open": True,
            "enabled": True,
            "shards": 1,
            "burst": None,
            "cost": 1,
            "counts": "all",
            "calendar": "",
            "time_zone": "",
            "lockout": 0,
            "ipv6_prefix": None,
            "rate": "3 per 60 s",
            "overrides": 0,
            "matches_nothing": False,
            "nearest_match": None,
        },
    ]


def test_policies_without_any():
    assert run("policies") == "No policies. Add them in the admin or with `ratelimits import`.\n"
    assert run_json("policies") == []


# ------------------------------------------------------------------------------- keys


def test_keys_json_reports_counts_remaining_ttl_and_memory(redis_client):
    now = redis_now_us(redis_client) / 1_000_000
    window = mid_window(now)
    login = add_policy("login", "api:login", limit=5, window=60)
    search = add_policy(
        "search", algorithm="sliding_counter", limit=100, window=window, key="user_or_ip"
    )
    items = add_policy(
        "items", "api:items", algorithm="fixed_window", limit=10, window=window, key="user_or_ip"
    )
    hit(login, V4, times=2)
    start, first = counter_traffic(redis_client, search, V4, previous=8, current=3)
    hit(items, V4, times=4)
    expected = estimate(redis_client, window, start, previous=8, current=3)
    redis_client.set("rl:policies:version", 4)
    redis_client.set("rl:{ip:203.0.113.7}:login:bogus", 1)
    redis_client.set("rl:{ip:203.0.113.7}:login:log:x", 1)
    redis_client.set("rlx:{ip:203.0.113.7}:login:log", 1)

    records = run_json("keys")

    assert [r["key"] for r in records] == sorted(
        [login.key_for(V4), search.key_for(V4), items.key_for(V4)]
    )
    found = by_key(records)
    log = found[login.key_for(V4)]
    assert set(log) == {
        "key",
        "policy",
        "identity",
        "identity_kind",
        "hashed",
        "username",
        "shard",
        "algorithm",
        "count",
        "limit",
        "window",
        "remaining",
        "override",
        "exempt",
        "ttl",
        "memory",
        "note",
        "lock",
        "locked_until",
        "locked_for",
    }
    assert {k: v for k, v in log.items() if k not in ("ttl", "memory")} == {
        "key": "rl:{ip:203.0.113.7}:login:log",
        "policy": "login",
        "identity": V4,
        "identity_kind": "ip",
        "hashed": False,
        "username": None,
        "shard": None,
        "algorithm": "sliding_log",
        "count": 2,
        "limit": 5,
        "window": 60,
        "remaining": 3,  # what the client may still send now
        "override": None,
        "exempt": False,
        "note": "",
        "lock": False,
        "locked_until": None,
        "locked_for": None,
    }
    assert 55 < log["ttl"] <= 60
    for record in records:
        assert record["memory"] == redis_client.memory_usage(record["key"]) > 0

    counter = found[search.key_for(V4)]
    assert counter["algorithm"] == "sliding_counter"
    assert counter["count"] == pytest.approx(expected, abs=0.002)
    assert not math.isclose(counter["count"], 3, abs_tol=0.5)  # the previous window weighs
    assert not math.isclose(counter["count"], 11, abs_tol=0.5)  # but not fully
    assert counter["remaining"] == math.floor(100 - expected)
    # The key lives until the end of the window after its current one, an expiry set with
    # the window's first request (replayed at its time here, so counted from then).
    assert counter["ttl"] == pytest.approx(start + 2 * window - first, abs=5)

    fixed = found[items.key_for(V4)]
    assert (fixed["count"], fixed["limit"], fixed["remaining"]) == (4, 10, 6)
    assert fixed["ttl"] == pytest.approx(start + window - now, abs=5)


def test_keys_table_and_summary(redis_client):
    login = add_policy("login", "api:login", limit=5, window=60)
    hit(login, V4, times=3)
    hit(login, "ip:198.51.100.1")
    text = run("keys")
    lines = text.splitlines()
    assert cells(lines[0]) == [
        "key",
        "policy",
        "identity",
        "algorithm",
        "count",
        "limit",
        "remaining",
        "ttl",
        "memory",
    ]
    row = row_of(text, "rl:{ip:203.0.113.7}:login:log")
    memory = redis_client.memory_usage(login.key_for(V4))
    assert row[:7] == ["rl:{ip:203.0.113.7}:login:log", "login", V4, "sliding_log", "3", "5", "2"]
    assert re.fullmatch(r"\d+\.\d s", row[7]) and 55 < float(row[7][:-2]) <= 60
    assert row[8] == str(memory)
    other = row_of(text, "rl:{ip:198.51.100.1}:login:log")
    assert other[4:7] == ["1", "5", "4"]
    total = memory + redis_client.memory_usage(login.key_for("ip:198.51.100.1"))
    assert lines[-1] == f"2 keys, {total:,} bytes."
    assert len(lines) == 4


def test_keys_skips_a_key_that_expires_while_scanning(redis_client, monkeypatch):
    login = add_policy("login")
    whos = [V4, "ip:203.0.113.70", "ip:198.51.100.1"]
    for who in whos:
        hit(login, who)
    doomed = login.key_for(whos[1])

    def after_each_scan_call(self: Any, examined: int, found: int) -> None:
        # Between SCAN and the pipelined read: the key's TTL runs out now.
        redis_client.delete(doomed)

    monkeypatch.setattr(output.ProgressLine, "__call__", after_each_scan_call)
    records = run_json("keys")
    assert {r["key"] for r in records} == {login.key_for(whos[0]), login.key_for(whos[2])}
    assert redis_client.exists(doomed) == 0
    hit(login, whos[1])
    assert run("keys").splitlines()[-1].startswith("2 keys, ")


def test_keys_without_any():
    assert run("keys") == "0 keys, 0 bytes.\n"
    assert run_json("keys") == []


def test_keys_does_not_consume(redis_client):
    login = add_policy("login", limit=5)
    search = add_policy("search", algorithm="sliding_counter", limit=10, window=3600)
    items = add_policy("items", algorithm="fixed_window", limit=10, window=3600)
    for policy in (login, search, items):
        hit(policy, V4, times=2)
    policies = (login, search, items)
    counts = [peek(redis_client, p, V4).count for p in policies]
    before = dumps(redis_client, all_keys(redis_client))
    for _ in range(3):
        assert len(run_json("keys")) == 3
        run("keys")
    assert [peek(redis_client, p, V4).count for p in policies] == counts
    assert dumps(redis_client, all_keys(redis_client)) == before
    assert counts[0] == counts[2] == 2


def test_keys_by_policy(redis_client):
    login = add_policy("login")
    search = add_policy("search", algorithm="sliding_counter")
    add_policy("empty")
    for who in (V4, "ip:203.0.113.70", "ip:198.51.100.1"):
        hit(login, who)
        hit(search, who)
    redis_client.set("rl:policies:version", 3)
    found = {r["key"] for r in run_json("keys", "--policy", "login")}
    assert found == {login.key_for(w) for w in (V4, "ip:203.0.113.70", "ip:198.51.100.1")}
    assert run_json("keys", "--policy", "empty") == []
    assert run("keys", "--policy", "empty") == "0 keys, 0 bytes.\n"
    memory = redis_client.memory_usage(login.key_for(V4))
    one = run("keys", "--policy", "login", "--identity", "203.0.113.7").splitlines()
    assert one[-1] == f"1 key, {memory:,} bytes." and len(one) == 3


@pytest.fixture
def clients(redis_client) -> dict[str, Any]:
    """Keys of several clients in several policies; identities made by the limiter's own
    code from requests, as the throttle makes them."""
    users = get_user_model()
    alice = users.objects.create_user("alice")
    bob = users.objects.create_user("bob")
    login = add_policy("login", "api:login", key="ip")
    search = add_policy("search", algorithm="sliding_counter", key="user_or_ip")
    payment = add_policy("payment", "/api/payment/*", limit=3, key="user")
    # A fixed window's key expires at the window's end: keep that end far from the test.
    window = mid_window(redis_now_us(redis_client) / 1_000_000)
    api = add_policy(
        "api", "api:items", algorithm="fixed_window", window=window, key="header:X-Api-Key"
    )

    def who(policy: CompiledPolicy, ip: str = "", user: Any = None, **meta: str) -> str:
        request = RequestFactory().get("/", REMOTE_ADDR=ip, **meta)
        request.user = user or AnonymousUser()
        found = facts.policy_identity(request, policy)
        assert found is not None
        return found

    ids = {
        "v4": who(login, "203.0.113.7"),
        "v4 neighbour": who(login, "203.0.113.70"),
        "v6": who(login, "2001:db8:1:2::5"),
        "v6 other": who(login, "2001:db8:1:3::5"),
        "alice": who(payment, user=alice),
        "bob": who(payment, user=bob),
        "secret": who(api, "192.0.2.1", HTTP_X_API_KEY=SECRET),
        "other secret": who(api, "192.0.2.1", HTTP_X_API_KEY="another-token"),
    }
    assert ids["v4"] == V4 and ids["v6"] == "ip:2001:db8:1:2::/64"
    assert ids["alice"] == f"u:{alice.pk}"
    traffic = {
        "v4": (login, search),
        "v4 neighbour": (login,),
        "v6": (login, search),
        "v6 other": (login,),
        "alice": (payment, search),
        "bob": (payment,),
        "secret": (api,),
        "other secret": (api,),
    }
    expected = {}
    for name, policies in traffic.items():
        for policy in policies:
            hit(policy, ids[name])
        expected[name] = {p.key_for(ids[name]) for p in policies}
    return {"ids": ids, "keys": expected, "alice": alice, "search": search}


def test_keys_identity_forms_select_one_clients_keys(clients):
    alice = clients["alice"]
    forms = {
        "203.0.113.7": "v4",
        "ip:203.0.113.7": "v4",
        " 203.0.113.7 ": "v4",
        "2001:db8:1:2::5": "v6",
        "ip:2001:db8:1:2:ffff:ffff:ffff:ffff": "v6",
        "2001:db8:1:2::/64": "v6",
        "ip:2001:db8:1:2::/64": "v6",
        f"u:{alice.pk}": "alice",
        "user:alice": "alice",
        "user:bob": "bob",
        f"header:X-Api-Key={SECRET}": "secret",
        f"header:x-api-key={SECRET}": "secret",  # header names are case-insensitive
        "header:X-Api-Key=another-token": "other secret",
        clients["ids"]["secret"]: "secret",  # the hashed identity as `keys` lists it
    }
    for form, client in forms.items():
        found = {r["key"] for r in run_json("keys", "--identity", form)}
        assert found == clients["keys"][client], form
    only = run_json("keys", "--policy", "search", "--identity", "user:alice")
    assert [r["key"] for r in only] == [clients["search"].key_for(f"u:{alice.pk}")]
    assert run_json("keys", "--identity", "198.51.100.99") == []


def test_keys_match_glob(clients):
    ids, expected = clients["ids"], clients["keys"]
    found = {r["key"] for r in run_json("keys", "--match", "ip:2001:db8:1:*")}
    assert found == expected["v6"] | expected["v6 other"]
    found = {r["key"] for r in run_json("keys", "--match", "ip:203.0.113.?")}
    assert found == expected["v4"]
    found = {r["key"] for r in run_json("keys", "--match", "h:*", "--policy", "api")}
    assert found == expected["secret"] | expected["other secret"]
    assert ids["secret"].startswith("h:")


def test_keys_show_hashed_identities_never_the_value(clients):
    secret_id = clients["ids"]["secret"]
    assert re.fullmatch(r"h:[0-9a-f]{32}", secret_id)
    text = run("keys", "--identity", f"header:X-Api-Key={SECRET}")
    key = f"rl:{{{secret_id}}}:api:fixed"
    row = row_of(text, key)
    assert row[2] == f"{secret_id} (hashed)"
    assert SECRET not in text
    (record,) = run_json("keys", "--identity", f"header:X-Api-Key={SECRET}")
    assert (record["key"], record["identity_kind"], record["hashed"]) == (key, "header", True)
    assert SECRET not in json.dumps(record)
    alice = clients["alice"]
    text = run("keys", "--identity", "user:alice", "--policy", "payment")
    assert row_of(text, f"rl:{{u:{alice.pk}}}:payment:log")[2] == f"u:{alice.pk} (alice)"
    (record,) = run_json("keys", "--identity", "user:alice", "--policy", "payment")
    assert (record["username"], record["identity_kind"], record["hashed"]) == (
        "alice",
        "user",
        False,
    )


def test_keys_refuses_bad_identities(clients):
    assert refused("keys", "--identity", "user:nobody") == "--identity: There is no user 'nobody'."
    assert "'nonsense' is not an identity" in refused("keys", "--identity", "nonsense")
    assert "IPv4 identities are single addresses" in refused("keys", "--identity", "10.0.0.0/8")
    assert "header:<Name>=<value>" in refused("keys", "--identity", "header:X-Api-Key")
    message = refused("keys", "--identity", "203.0.113.7", "--match", "ip:*")
    assert message == "Give --identity or --match, not both."


def test_keys_unknown_policy_names_close_ones(redis_client):
    assert (
        refused("keys", "--policy", "login") == "There is no policy 'login'. There are no policies."
    )
    for name in ("login", "logout", "search"):
        add_policy(name)
    assert refused("keys", "--policy", "logn") == (
        "There is no policy 'logn'. Did you mean: login, logout?"
    )
    assert refused("keys", "--policy", "zzz") == (
        "There is no policy 'zzz'. Policies: login, logout, search."
    )


def test_keys_notes_for_deleted_and_switched_policies(redis_client):
    gone = add_policy("gone", algorithm="fixed_window", window=3600)
    switched = add_policy("switched", algorithm="sliding_counter", limit=7, window=3600)
    live = add_policy("live")
    for policy in (gone, switched, live):
        hit(policy, V4)
    Policy.objects.filter(name="gone").delete()
    Policy.objects.filter(name="switched").update(algorithm="fixed_window")

    found = by_key(run_json("keys"))
    assert set(found) == {gone.key_for(V4), switched.key_for(V4), live.key_for(V4)}
    old = found[gone.key_for(V4)]
    assert old["note"] == "policy deleted"
    assert (old["count"], old["limit"], old["window"], old["remaining"]) == (None,) * 4
    assert old["ttl"] > 0 and old["memory"] > 0
    left = found[switched.key_for(V4)]
    assert left["note"] == "left over: the policy now uses fixed_window"
    assert (left["count"], left["remaining"], left["limit"]) == (None, None, 7)
    assert found[live.key_for(V4)]["note"] == ""
    assert found[live.key_for(V4)]["count"] == 1

    text = run("keys")
    assert cells(text.splitlines()[0])[-1] == "note"
    assert row_of(text, gone.key_for(V4))[-1] == "policy deleted"
    assert row_of(text, switched.key_for(V4))[-1] == "left over: the policy now uses fixed_window"
    assert row_of(text, live.key_for(V4))[-1] != "policy deleted"
    assert len(row_of(text, live.key_for(V4))) == 9  # no note
    # The left-over key is still found by its policy's name.
    assert [r["key"] for r in run_json("keys", "--policy", "switched")] == [switched.key_for(V4)]


def test_keys_limit(redis_client):
    login = add_policy("login")
    for i in range(5):
        hit(login, f"ip:192.0.2.{i}")
    text = run("keys", "--limit", "2")
    assert len(text.splitlines()) == 4
    assert text.splitlines()[-1].endswith(
        " bytes. Stopped at --limit 2; there may be more (--limit 0 for all)."
    )
    assert text.startswith("key ")
    assert len(run_json("keys", "--limit", "2")) == 2
    assert len(run_json("keys", "--limit", "0")) == 5
    assert len(run_json("keys")) == 5
    assert "Stopped" not in run("keys", "--limit", "0")
    assert "Stopped" not in run("keys")
    assert "-1 must be 0 (no limit) or more" in refused("keys", "--limit", "-1")
    assert "'x' is not a whole number" in refused("keys", "--limit", "x")


def test_keys_scan_of_100k_keys(redis_client, monkeypatch):
    """100,000 limiter keys and foreign ones: exact subsets, and --limit stops scanning."""
    now_us = redis_now_us(redis_client)
    window = mid_window(now_us / 1_000_000)
    index = now_us // (window * 1_000_000)
    target = add_policy("target", algorithm="fixed_window", limit=10, window=window)
    add_policy("audit", algorithm="sliding_log", limit=10, window=window)
    add_policy("bulk", algorithm="sliding_counter", limit=10, window=window)
    total = 100_000

    def key_of(i: int) -> str:
        who = f"ip:10.{i >> 16}.{(i >> 8) & 255}.{i & 255}"
        if i % 50 == 0:
            return build_key("rl", who, "target", "fixed_window")
        if i % 50 == 1:
            return build_key("rl", who, "audit", "sliding_log")
        return build_key("rl", who, "bulk", "sliding_counter")

    pipe = redis_client.pipeline(transaction=False)
    for i in range(total):
        key = key_of(i)
        if i % 50 == 0:
            pipe.hset(key, mapping={"w": index, "c": 3})
        elif i % 50 == 1:
            pipe.zadd(key, {f"{now_us}-0": now_us - 1_000_000})
        else:
            pipe.hset(key, mapping={"w": index, "c": 1, "p": 0})
        pipe.expire(key, 3600)
        if i % 10_000 == 9_999:
            pipe.execute()
    for i in range(0, 2000, 2):  # other prefixes, same layout
        who = f"ip:10.0.{(i >> 8) & 255}.{i & 255}"
        pipe.hset(f"rlx:{{{who}}}:target:fixed", mapping={"w": index, "c": 1})
        pipe.hset(f"other:{{{who}}}:target:fixed", mapping={"w": index, "c": 1})
        pipe.hset(f"x:rl:{{{who}}}:target:fixed", mapping={"w": index, "c": 1})
    pipe.set("rl:policies:version", 7)
    pipe.hset("rl:{ip:10.0.0.0}:target:bogus", "c", 1)  # no algorithm has that suffix
    pipe.hset("rl:{ip:10.0.0.0}:target:fixed:old", "c", 1)  # not the layout
    pipe.hset("rl:{ip:10.0.0}:x}:target:fixed", "c", 1)  # a brace inside the identity
    pipe.hset("rl:{ip:10.0.0.0}:targets:fixed", "c", 1)  # another policy's name
    pipe.hset("rl:{ip:10.0.7.1}:audit:log:old", "c", 1)  # inside --match ip:10.0.7.*
    pipe.hset("rl:{ip:10.0.7.1}:audit:bogus", "c", 1)
    pipe.execute()
    size = inventory.key_count(redis_client)
    assert size == total + 3 * 1000 + 7
    expected_target = {key_of(i) for i in range(0, total, 50)}

    calls = scan_calls(redis_client)
    records = run_json("keys", "--policy", "target", "--limit", "0")
    full_scan = scan_calls(redis_client) - calls
    assert len(records) == 2000
    assert {r["key"] for r in records} == expected_target
    assert {(r["count"], r["remaining"], r["policy"]) for r in records} == {(3, 7, "target")}
    assert full_scan >= 90  # SCAN ... COUNT 1000 over ~103,000 keys

    in_glob = {key_of(i) for i in range(7 * 256, 8 * 256)}  # ip:10.0.7.*
    found = {r["key"] for r in run_json("keys", "--match", "ip:10.0.7.*", "--limit", "0")}
    assert found == in_glob
    found = {
        r["key"]
        for r in run_json("keys", "--match", "ip:10.0.7.*", "--policy", "audit", "--limit", "0")
    }
    assert found == {k for k in in_glob if k.endswith(":audit:log")} and len(found) == 5

    calls = scan_calls(redis_client)
    records = run_json("keys", "--policy", "target", "--limit", "10")
    limited = scan_calls(redis_client) - calls
    assert len(records) == 10 and {r["key"] for r in records} <= expected_target
    assert limited <= 5 and limited * 10 < full_scan
    calls = scan_calls(redis_client)
    text = run("keys", "--limit", "10")
    assert scan_calls(redis_client) - calls == 1
    assert text.splitlines()[-1].endswith(
        "Stopped at --limit 10; there may be more (--limit 0 for all)."
    )
    assert len(text.splitlines()) == 12

    # Progress, on a terminal only, and never mixed into the JSON on stdout.
    monkeypatch.setattr(output, "PROGRESS_INTERVAL", 0)
    terminal = Terminal()
    calls = scan_calls(redis_client)
    out = run("keys", "--policy", "target", "--limit", "0", "--json", stderr=terminal)
    calls = scan_calls(redis_client) - calls
    assert len(json.loads(out)) == 2000
    progress = terminal.getvalue()
    assert progress.startswith("\rscanning: about ")
    assert f" of {size:,} keys examined" in progress
    assert progress.endswith(" 2,000 found \r\033[K")
    assert progress.count("\rscanning") == calls  # one line per SCAN call
    plain = StringIO()
    run("keys", "--policy", "target", "--limit", "0", "--json", stderr=plain)
    assert plain.getvalue() == ""

    # reset deletes all 2,000 (in several UNLINK batches) and nothing else.
    before = inventory.key_count(redis_client)
    text = run("reset", "--policy", target.name, "--yes")
    assert text.splitlines()[-1] == "Deleted 2,000 keys for policy target."
    assert len(text.splitlines()) == 2001
    assert inventory.key_count(redis_client) == before - 2000
    assert not any(redis_client.exists(key) for key in list(expected_target)[:100])
    assert (
        redis_client.exists("rlx:{ip:10.0.0.0}:target:fixed", "rl:{ip:10.0.0.0}:target:bogus") == 2
    )
    assert run_json("keys", "--policy", "target", "--limit", "0") == []


# ---------------------------------------------------------------------------- inspect


@pytest.mark.parametrize("algorithm", ["sliding_log", "compact_log"])
def test_inspect_a_log_lists_every_entry(redis_client, algorithm):
    login = add_policy("login", "api:login", algorithm=algorithm, limit=5, window=60)
    now_us = redis_now_us(redis_client)
    base = now_us // 1000 * 1000 + 500  # mid-millisecond: shown exactly to the ms
    times = [base - 90_000_000, base - 50_000_000, base - 40_000_000]
    for at in times:
        hit(login, V4, now=at / 1_000_000)
    key = login.key_for(V4)
    if algorithm == "sliding_log":
        stored = [int(s) for _, s in redis_client.zrange(key, 0, -1, withscores=True)]
    else:
        stored = inspection.ring_entries(redis_client.get(key))
    assert stored == times

    record = run_json("inspect", key)
    assert [e["time"] for e in record["entries"]] == [iso(t) for t in times]
    ages = [e["age"] for e in record["entries"]]
    late = ages[0] - 90  # how long after `base` the command read the Redis clock
    assert 0 <= late < 5
    assert ages == pytest.approx([90 + late, 50 + late, 40 + late], abs=1e-6)
    assert record["key"] == key and record["exists"] is True
    assert (record["policy"], record["algorithm"], record["identity"]) == ("login", algorithm, V4)
    # The 90 s old entry has left the 60 s window.
    assert (record["count"], record["limit"], record["remaining"]) == (2, 5, 3)
    assert record["allowed"] is True and record["retry_after"] == 0
    assert 0 < record["ttl"] <= 60 and record["memory"] == redis_client.memory_usage(key)
    assert "windows" not in record

    text = run("inspect", key)
    lines = text.splitlines()
    assert lines[0] == f"key        {key}"
    assert f"policy     login: {algorithm}, 5 per 60 s, enforce" in lines
    assert "identity   ip:203.0.113.7, ip" in lines
    assert re.search(
        r"^now        \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(Redis TIME\)$", text, re.M
    )
    assert "count      2 of 5" in lines
    assert "next       allowed; 3 left now" in lines
    assert "entries    3" in lines
    first = row_of(text, "1")
    assert first[:2] == ["1", iso(times[0])] and first[-1] == "left the window"
    assert re.fullmatch(r"9\d\.\d s", first[2])
    second = row_of(text, "2")
    assert second[1] == iso(times[1]) and len(second) == 3
    assert row_of(text, "3")[1] == iso(times[2])

    by_identity = run_json("inspect", "--policy", "login", "--identity", "203.0.113.7")
    assert by_identity["key"] == key
    assert [e["time"] for e in by_identity["entries"]] == [iso(t) for t in times]
    assert run("inspect", "--policy", "login", "--identity", "ip:203.0.113.7").startswith(
        f"key        {key}\n"
    )


def test_inspect_sliding_counter_shows_both_windows(redis_client):
    now = redis_now_us(redis_client) / 1_000_000
    window = mid_window(now)
    search = add_policy("search", algorithm="sliding_counter", limit=100, window=window)
    start, _ = counter_traffic(redis_client, search, V4, previous=8, current=3)
    expected = estimate(redis_client, window, start, previous=8, current=3)
    key = search.key_for(V4)

    record = run_json("inspect", key)
    second = 1_000_000
    assert record["windows"] == [
        {
            "label": "current",
            "start": iso(start * second),
            "end": iso((start + window) * second),
            "count": 3,
        },
        {
            "label": "previous",
            "start": iso((start - window) * second),
            "end": iso(start * second),
            "count": 8,
        },
    ]
    assert record["stored"] == {"w": str(start // window), "c": "3", "p": "8"}
    assert record["count"] == pytest.approx(expected, abs=0.002)
    assert record["remaining"] == math.floor(100 - expected)
    assert "entries" not in record

    text = run("inspect", key)
    assert cells(text.splitlines()[-3]) == ["window", "start", "end", "count"]
    assert row_of(text, "current") == [
        "current",
        iso(start * second),
        iso((start + window) * second),
        "3",
    ]
    assert row_of(text, "previous")[1:] == [
        iso((start - window) * second),
        iso(start * second),
        "8",
    ]
    shown = re.search(r"^count      (\d+(?:\.\d+)?) of 100$", text, re.M)
    assert shown and float(shown[1]) == pytest.approx(expected, abs=0.002)


def test_inspect_fixed_window_shows_count_and_window_end(redis_client):
    now = redis_now_us(redis_client) / 1_000_000
    window = mid_window(now)
    items = add_policy("items", algorithm="fixed_window", limit=4, window=window)
    hit(items, V4, times=4)
    start = int(now // window) * window
    end = start + window
    record = run_json("inspect", "--policy", "items", "--identity", "203.0.113.7")
    assert record["windows"] == [
        {"label": "current", "start": iso(start * 10**6), "end": iso(end * 10**6), "count": 4}
    ]
    assert (record["count"], record["remaining"], record["allowed"]) == (4, 0, False)
    assert record["retry_after"] == pytest.approx(end - now, abs=5)
    assert record["ttl"] == pytest.approx(end - now, abs=5)
    text = run("inspect", items.key_for(V4))
    assert "count      4 of 4" in text.splitlines()
    assert re.search(r"^next       denied; retry in \d+\.\d s$", text, re.M)
    assert row_of(text, "current") == ["current", iso(start * 10**6), iso(end * 10**6), "4"]

    # A count from the previous window no longer counts.
    hit(items, "ip:198.51.100.1", now=start - 10)
    stale = run_json("inspect", "--policy", "items", "--identity", "198.51.100.1")
    assert stale["windows"] == [
        {
            "label": "expired",
            "start": iso((start - window) * 10**6),
            "end": iso(start * 10**6),
            "count": 1,
        }
    ]
    assert (stale["count"], stale["remaining"]) == (0, 4)


def test_inspect_never_changes_the_key(redis_client):
    policies = [
        add_policy("login"),
        add_policy("search", algorithm="sliding_counter", window=3600),
        add_policy("items", algorithm="fixed_window", window=3600),
    ]
    for policy in policies:
        hit(policy, V4, times=2)
    keys = [p.key_for(V4) for p in policies]
    before = dumps(redis_client, keys)
    ttls = [redis_client.pttl(k) for k in keys]
    for key in keys:
        run("inspect", key)
        run_json("inspect", key)
    for policy in policies:
        run("inspect", "--policy", policy.name, "--identity", V4)
    assert dumps(redis_client, keys) == before
    for key, ttl in zip(keys, ttls, strict=True):
        assert ttl - 5000 < redis_client.pttl(key) <= ttl
    assert [peek(redis_client, p, V4).count for p in policies] == [2, 2, 2]


def test_inspect_a_key_not_in_redis(redis_client):
    add_policy("login", limit=5)
    key = "rl:{ip:198.51.100.1}:login:log"
    text = run("inspect", "--policy", "login", "--identity", "198.51.100.1")
    lines = text.splitlines()
    assert lines[0] == f"key        {key}  (not in Redis: nothing counted)"
    assert "ttl        -" in lines and "memory     - bytes" in lines
    assert "count      0 of 5" in lines and "next       allowed; 5 left now" in lines
    assert lines[-1] == "entries    0"
    record = run_json("inspect", key)
    assert (record["exists"], record["ttl"], record["memory"], record["entries"]) == (
        False,
        None,
        None,
        [],
    )
    assert (record["count"], record["remaining"]) == (0, 5)
    assert redis_client.exists(key) == 0


def test_inspect_a_key_whose_policy_was_deleted(redis_client):
    gone = add_policy("gone", algorithm="fixed_window", window=3600)
    hit(gone, V4, times=2)
    Policy.objects.filter(name="gone").delete()
    key = gone.key_for(V4)
    stored = {k.decode(): v.decode() for k, v in redis_client.hgetall(key).items()}
    text = run("inspect", key)
    assert "policy     gone (deleted)" in text.splitlines()
    assert "note       policy deleted" in text.splitlines()
    assert f"stored     {stored}" in text.splitlines()
    assert "count " not in text
    record = run_json("inspect", key)
    assert (record["count"], record["limit"], record["note"]) == (None, None, "policy deleted")
    assert record["stored"] == stored and stored["c"] == "2" and record["windows"] == []
    assert refused("inspect", "--policy", "gone", "--identity", V4) == (
        "There is no policy 'gone'. There are no policies."
    )


@pytest.mark.parametrize(
    ("algorithm", "foreign"),
    [
        ("sliding_log", "string"),
        ("compact_log", "hash"),
        ("compact_log", "string"),  # not a ring: its script refuses it
        ("sliding_counter", "string"),
        ("fixed_window", "list"),
        ("token_bucket", "hash"),
        ("concurrency", "string"),
    ],
)
def test_inspect_a_key_holding_a_foreign_value(redis_client, algorithm, foreign):
    policy = add_policy("login", algorithm=algorithm, limit=5, window=60)
    key = policy.key_for(V4)
    {
        "string": lambda: redis_client.set(key, "not a ring"),
        "hash": lambda: redis_client.hset(key, "x", "1"),
        "list": lambda: redis_client.rpush(key, "x"),
    }[foreign]()
    note = (
        f"the key holds a Redis {foreign} that {algorithm} cannot read: "
        "requests under it get the policy's fail mode until the key is deleted"
    )
    text = run("inspect", key)
    assert f"note       {note}" in text.splitlines()
    assert "count " not in text and "did not answer" not in text
    record = run_json("inspect", key)
    assert (record["exists"], record["note"], record["count"]) == (True, note, None)
    # What the note says: the limiter answers such a key with the fail mode.
    decision = limiter.decide([limiter.Check(policy, V4)]).decisions[0]
    assert decision.failed
    assert redis_client.type(key).decode() == foreign


def test_inspect_refusals(redis_client):
    add_policy("login")
    for key in (
        "foo:bar",
        "rlx:{ip:1.2.3.4}:login:log",
        "rl:{ip:1.2.3.4}:login:bogus",
        "rl:policies:version",
    ):
        assert refused("inspect", key) == (
            f"{key!r} is not a ratelimits key: "
            "expected rl:{<identity>}:<policy>:<log|wring|counter|fixed|bucket|leases|lock>."
        )
    key = "rl:{ip:1.2.3.4}:login:log"
    both = "Give a KEY or --policy and --identity, not both."
    assert refused("inspect", key, "--policy", "login") == both
    assert refused("inspect", key, "--identity", "1.2.3.4") == both
    neither = "Give a KEY, or both --policy and --identity."
    assert refused("inspect", "--policy", "login") == neither
    assert refused("inspect", "--identity", "1.2.3.4") == neither
    assert refused("inspect") == neither
    assert "Did you mean: login?" in refused("inspect", "--policy", "logn", "--identity", "1.2.3.4")
    assert "is not an identity" in refused("inspect", "--policy", "login", "--identity", "x")
    assert all_keys(redis_client) == set()


# ------------------------------------------------------------------------------ reset


@pytest.fixture
def reset_keys(redis_client) -> dict[str, Any]:
    login = add_policy("login")
    search = add_policy("search", algorithm="sliding_counter")
    whos = [V4, "ip:203.0.113.70", "ip:198.51.100.1"]
    for who in whos:
        hit(login, who)
        hit(search, who)
    redis_client.set("rl:policies:version", 1)
    redis_client.set("rlx:{ip:203.0.113.7}:login:log", 1)
    redis_client.set("other", 1)
    return {"login": {login.key_for(w) for w in whos}, "all": all_keys(redis_client)}


def test_reset_dry_run_deletes_nothing(redis_client, reset_keys):
    before = dumps(redis_client, reset_keys["all"])
    text = run("reset", "--policy", "login", "--dry-run")
    assert text.splitlines() == [
        *sorted(reset_keys["login"]),
        "Dry run: would delete 3 keys for policy login.",
    ]
    text = run("reset", "--policy", "login", "--identity", "203.0.113.7", "--dry-run", "--yes")
    assert text.splitlines() == [
        "rl:{ip:203.0.113.7}:login:log",
        "Dry run: would delete 1 key for policy login, identity ip:203.0.113.7.",
    ]
    assert dumps(redis_client, all_keys(redis_client)) == before


def test_reset_yes_deletes_exactly_the_policys_keys(redis_client, reset_keys):
    text = run("reset", "--policy", "login", "--yes")
    assert text.splitlines()[-1] == "Deleted 3 keys for policy login."
    assert all_keys(redis_client) == reset_keys["all"] - reset_keys["login"]
    assert run("reset", "--policy", "login", "--yes") == "No keys for policy login.\n"


def test_reset_one_identity(redis_client, reset_keys):
    text = run("reset", "--policy", "login", "--identity", "203.0.113.7", "--yes")
    assert text.splitlines() == [
        "rl:{ip:203.0.113.7}:login:log",
        "Deleted 1 key for policy login, identity ip:203.0.113.7.",
    ]
    assert all_keys(redis_client) == reset_keys["all"] - {"rl:{ip:203.0.113.7}:login:log"}
    text = run("reset", "--policy", "login", "--identity", "198.51.100.99", "--yes")
    assert text == "No keys for policy login, identity ip:198.51.100.99.\n"


@pytest.mark.parametrize("stdin", [None, "", "y\n"])
def test_reset_without_yes_or_terminal_refuses(redis_client, reset_keys, monkeypatch, stdin):
    monkeypatch.setattr(sys, "stdin", None if stdin is None else StringIO(stdin))
    before = dumps(redis_client, reset_keys["all"])
    message = refused("reset", "--policy", "login")
    assert message == (
        "Delete 3 keys for policy login? Refusing without a terminal to confirm; pass --yes."
    )
    assert dumps(redis_client, all_keys(redis_client)) == before


def test_reset_asks_on_a_terminal(redis_client, reset_keys, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    text = run("reset", "--policy", "login")
    asked = capsys.readouterr()
    assert (asked.out, asked.err) == ("", "Delete 3 keys for policy login? [y/N] ")
    assert text.splitlines()[-1] == "Deleted 3 keys for policy login."
    assert all_keys(redis_client) == reset_keys["all"] - reset_keys["login"]


@pytest.mark.parametrize("answer", ["n\n", "\n", "", "yess\n"])
def test_reset_cancelled_on_a_terminal(redis_client, reset_keys, monkeypatch, capsys, answer):
    monkeypatch.setattr(sys, "stdin", Terminal(answer))
    before = dumps(redis_client, reset_keys["all"])
    assert refused("reset", "--policy", "login") == "Cancelled; nothing changed."
    assert "[y/N]" in capsys.readouterr().err
    assert dumps(redis_client, all_keys(redis_client)) == before


def test_reset_json_lists_the_keys_and_what_was_deleted(redis_client, reset_keys):
    login = sorted(reset_keys["login"])
    expected = {
        "policy": "login",
        "identity": None,
        "keys": login,
        "lockouts": 0,
        "dry_run": True,
        "deleted": 0,
    }
    assert run_json("reset", "--policy", "login", "--dry-run") == expected
    assert all_keys(redis_client) == reset_keys["all"]
    one = ["rl:{ip:203.0.113.7}:login:log"]
    assert run_json("reset", "--policy", "login", "--identity", "203.0.113.7", "--yes") == {
        **expected, "identity": V4, "keys": one, "dry_run": False, "deleted": 1
    }  # fmt: skip
    assert all_keys(redis_client) == reset_keys["all"] - set(one)
    assert run_json("reset", "--policy", "login", "--yes") == {
        **expected, "keys": [k for k in login if k not in one], "dry_run": False, "deleted": 2
    }  # fmt: skip
    assert run_json("reset", "--policy", "login", "--yes") == {
        **expected, "keys": [], "dry_run": False
    }  # fmt: skip
    assert all_keys(redis_client) == reset_keys["all"] - reset_keys["login"]


def test_reset_json_asks_on_stderr_so_stdout_stays_json(
    redis_client, reset_keys, monkeypatch, capsys
):
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    record = run_json("reset", "--policy", "login")
    assert record["deleted"] == 3
    assert capsys.readouterr().err == "Delete 3 keys for policy login? [y/N] "
    monkeypatch.setattr(sys, "stdin", None)
    hit(CompiledPolicy.from_model(Policy.objects.get(name="login")), V4)
    assert refused("reset", "--policy", "login", "--json").endswith("pass --yes.")
    assert "rl:{ip:203.0.113.7}:login:log" in all_keys(redis_client)


def test_reset_refusals(redis_client, reset_keys):
    before = dumps(redis_client, reset_keys["all"])
    assert refused("reset", "--policy", "logn", "--yes") == (
        "There is no policy 'logn'. Did you mean: login?"
    )
    assert "--policy" in refused("reset", "--yes")
    assert "is not an identity" in refused("reset", "--policy", "login", "--identity", "x", "--yes")
    assert dumps(redis_client, all_keys(redis_client)) == before


# ------------------------------------------------------------------------------ check


@pytest.fixture
def site(redis_client) -> dict[str, Any]:
    """The demo's policies (and a header one, and a disabled one), and a user."""
    alice = get_user_model().objects.create_user("alice")
    return {
        "alice": alice,
        "login": add_policy("login", "api:login", methods="POST", key="ip", fail_open=False),
        "payment": add_policy("payment", "/api/payment/*", methods="POST", limit=3, key="user"),
        "search": add_policy(
            "search",
            algorithm="sliding_counter",
            limit=20,
            window=3600,
            key="user_or_ip",
            mode="shadow",
        ),
        "api": add_policy(
            "api",
            "api:items",
            algorithm="fixed_window",
            limit=10,
            window=3600,
            key="header:X-Api-Key",
        ),
        "off": add_policy("off", "/api/*", enabled=False),
    }


def test_check_shows_the_clients_count_without_consuming(redis_client, site):
    login = site["login"]
    hit(login, V4, times=2)
    key = login.key_for(V4)
    before = redis_client.dump(key)
    text = run("check", "--path", "/api/login/", "--method", "post", "--ip", "203.0.113.7")
    lines = text.splitlines()
    assert lines[0] == "POST /api/login/: url name api:login, throttle_scope -"
    assert cells(lines[1]) == [
        "policy",
        "endpoint",
        "rate",
        "algorithm",
        "mode",
        "identity",
        "count",
        "remaining",
        "next",
    ]
    assert cells(lines[2]) == [
        "login",
        "api:login",
        "5 per 60 s",
        "sliding_log",
        "enforce",
        V4,
        "2",
        "3",
        "allowed",
    ]
    assert lines[3:] == ["The next request would be allowed."]
    record = run_json("check", "--path", "/api/login/", "--method", "POST", "--ip", "203.0.113.7")
    assert record == {
        "method": "POST",
        "path": "/api/login/",
        "url_name": "api:login",
        "throttle_scope": None,
        "allowed": True,
        "retry_after": None,
        "policies": [
            {
                "policy": "login",
                "identity": V4,
                "enforce": True,
                "limit": 5,
                "window": 60,
                "count": 2,
                "remaining": 3,
                "allowed": True,
                "retry_after": 0,
                "override": None,
                "exempt": False,
            }
        ],
    }
    assert redis_client.dump(key) == before
    assert peek(redis_client, login, V4).count == 2

    hit(login, V4, times=3)
    text = run("check", "--path", "/api/login/", "--method", "POST", "--ip", "203.0.113.7")
    row = row_of(text, "login")
    assert row[6:8] == ["5", "0"] and re.fullmatch(r"denied \(\d+\.\d s\)", row[8])
    assert re.search(
        r"^The next request would be denied by login; retry in \d+\.\d s\.$", text, re.M
    )
    record = run_json("check", "--path", "/api/login/", "--method", "POST", "--ip", "203.0.113.7")
    assert record["allowed"] is False and 50 < record["retry_after"] <= 60
    assert peek(redis_client, login, V4).count == 5
    # Another address has its own count; IPv6 is grouped by its /64.
    other = run_json("check", "--path", "/api/login/", "--method", "POST", "--ip", "203.0.113.70")
    assert (other["policies"][0]["count"], other["policies"][0]["remaining"]) == (0, 5)
    six = run_json("check", "--path", "/api/login/", "--method", "POST", "--ip", "2001:db8::1")
    assert six["policies"][0]["identity"] == "ip:2001:db8::/64"


def test_check_as_a_user(redis_client, site):
    alice = site["alice"]
    hit(site["payment"], f"u:{alice.pk}", times=3)
    record = run_json("check", "--path", "/api/payment/", "--method", "POST", "--user", "alice")
    assert record["url_name"] == "api:payment"
    (payment,) = record["policies"]
    assert (payment["policy"], payment["identity"], payment["count"]) == (
        "payment",
        f"u:{alice.pk}",
        3,
    )
    assert payment["allowed"] is False and record["allowed"] is False
    assert 50 < record["retry_after"] <= 60
    hit(site["search"], f"u:{alice.pk}", times=4)
    record = run_json("check", "--path", "/api/search/", "--user", "alice", "--ip", "192.0.2.9")
    assert (record["url_name"], record["throttle_scope"]) == ("api:search", "search")
    (search,) = record["policies"]
    assert (search["identity"], search["count"], search["enforce"]) == (
        f"u:{alice.pk}",
        4,
        False,
    )
    text = run("check", "--path", "/api/search/", "--user", "alice")
    assert text.splitlines()[0] == "GET /api/search/: url name api:search, throttle_scope search"
    assert row_of(text, "search")[4:8] == ["shadow", f"u:{alice.pk}", "4", "16"]


def test_check_with_a_header(redis_client, site):
    api = site["api"]
    hashed = identity.header_identity(identity.meta_key("X-Api-Key"), SECRET)
    hit(api, hashed, times=3)
    record = run_json("check", "--path", "/api/items/", "--header", f"X-Api-Key={SECRET}")
    (found,) = record["policies"]
    assert (found["policy"], found["identity"], found["count"], found["remaining"]) == (
        "api",
        hashed,
        3,
        7,
    )
    text = run("check", "--path", "/api/items/", "--header", f"X-Api-Key={SECRET}")
    assert SECRET not in text and row_of(text, "api")[5] == hashed
    # Without the header, the policy counts by address.
    record = run_json("check", "--path", "/api/items/", "--ip", "192.0.2.1")
    assert record["policies"][0]["identity"] == "ip:192.0.2.1"
    assert record["policies"][0]["count"] == 0


def test_check_explains_skipped_policies(redis_client, site):
    record = run_json("check", "--path", "/api/payment/", "--method", "POST", "--ip", "192.0.2.1")
    assert record["policies"] == [
        {
            "policy": "payment",
            "identity": None,
            "skipped": "does not count anonymous requests (give --user)",
        }
    ]
    assert record["allowed"] is True
    text = run("check", "--path", "/api/payment/", "--method", "POST")
    row = row_of(text, "payment")
    assert row[-1] == "not counted: does not count anonymous requests (give --user)"
    assert row[5:8] == ["-", "-", "-"]
    record = run_json("check", "--path", "/api/login/", "--method", "POST")
    assert record["policies"] == [
        {"policy": "login", "identity": None, "skipped": "counts by address (give --ip)"}
    ]
    text = run("check", "--path", "/api/items/")
    assert row_of(text, "api")[-1] == "not counted: counts by address (give --ip)"
    assert all_keys(redis_client) == set()


def test_check_when_no_policy_matches(redis_client, site):
    for args, first in [
        (("--path", "/nowhere/"), "GET /nowhere/: url name -, throttle_scope -"),
        (("--path", "/api/login/"), "GET /api/login/: url name api:login, throttle_scope -"),
        (("--path", "/api/payment/", "--method", "GET", "--user", "alice"), "GET /api/payment/"),
    ]:
        text = run("check", *args)
        lines = text.splitlines()
        assert lines[0].startswith(first)
        assert lines[1:] == ["No enabled policy matches this request: it is not rate limited."]
        record = run_json("check", *args)
        assert (record["policies"], record["allowed"]) == ([], True)


def test_check_refusals(site):
    base = ("check", "--path", "/api/login/", "--method", "POST")
    assert refused(*base, "--ip", "garbage") == "--ip 'garbage' is not an IP address."
    assert refused(*base, "--ip", "10.0.0.0/8") == "--ip '10.0.0.0/8' is not an IP address."
    assert refused("check", "--path", "api/login/") == "--path 'api/login/' must start with /."
    assert refused(*base, "--user", "nobody") == "--user: there is no user 'nobody'."
    message = "--header must be NAME=VALUE, e.g. --header X-Api-Key=abc123."
    assert refused(*base, "--header", "X-Api-Key") == message
    assert refused(*base, "--header", "X-Api-Key=") == message
    assert refused(*base, "--header", "=abc") == message
    assert "--path" in refused("check", "--ip", "192.0.2.1")


# ---------------------------------------------------------------------- Redis is down


@pytest.fixture
def dead_redis() -> Iterator[int]:
    """The tool client points at a port nobody listens on (the cluster's startup node, on
    the cluster backend)."""
    port = free_port()
    caches = copy.deepcopy(settings.CACHES)
    caches["default"]["LOCATION"] = f"redis://127.0.0.1:{port}/0"
    ratelimits = dict(getattr(settings, "RATELIMITS", {}))
    if ratelimits.get("CLUSTER_NODES"):
        ratelimits["CLUSTER_NODES"] = [f"redis://127.0.0.1:{port}"]
    with override_settings(CACHES=caches, RATELIMITS=ratelimits):
        yield port


@pytest.mark.parametrize(
    "args",
    [
        ("keys",),
        ("keys", "--policy", "login", "--identity", "203.0.113.7", "--json"),
        ("inspect", "rl:{ip:203.0.113.7}:login:log"),
        ("inspect", "--policy", "login", "--identity", "203.0.113.7", "--json"),
        ("reset", "--policy", "login", "--yes"),
        ("reset", "--policy", "login", "--dry-run"),
        ("check", "--path", "/api/login/", "--method", "POST", "--ip", "203.0.113.7"),
        ("check", "--path", "/nowhere/"),
    ],
)
def test_unreachable_redis_is_a_one_line_command_error(dead_redis, args, backend):
    add_policy("login", "api:login", methods="POST")
    with pytest.raises(CommandError) as raised:
        run(*args)
    message = str(raised.value)
    where = f"127.0.0.1:{dead_redis}"
    if backend == "cluster":
        where = f"cluster nodes {where}"
    assert message.startswith(f"Redis at {where} did not answer: ")
    assert "\n" not in message
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_without_redis_arguments_are_still_checked_first(dead_redis):
    add_policy("login", "api:login", methods="POST")
    assert "login" in run("policies")
    assert "is not an identity" in refused("keys", "--identity", "garbage")
    assert "not both" in refused("keys", "--identity", "192.0.2.1", "--match", "ip:*")
    assert "Did you mean: login?" in refused("keys", "--policy", "logn")
    assert "is not a ratelimits key" in refused("inspect", "nonsense")
    assert "Did you mean: login?" in refused("reset", "--policy", "logn", "--yes")
    assert "must start with /" in refused("check", "--path", "api/login/")


@pytest.mark.slow
def test_unreachable_redis_exits_1_without_a_traceback(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "REDIS_URL": f"redis://127.0.0.1:{port}/0",
    }

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    migrated = manage("migrate", "--verbosity", "0")
    assert migrated.returncode == 0, migrated.stderr
    done = manage("ratelimits", "keys")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"CommandError: Redis at 127.0.0.1:{port} did not answer: ")
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""


def test_a_token_bucket_key_through_keys_inspect_and_reset(redis_client):
    bucket = add_policy("bursty", algorithm="token_bucket", limit=2, window=60, burst=4)
    hit(bucket, V4, times=3)  # 3 of a burst of 4; one unit frees every 30 s
    record = by_key(run_json("keys"))[bucket.key_for(V4)]
    assert (record["algorithm"], record["limit"], record["remaining"]) == ("token_bucket", 2, 1)
    assert record["count"] == pytest.approx(3, abs=0.01)
    assert 85 < record["ttl"] <= 90  # empty again three intervals from now
    assert record["memory"] == redis_client.memory_usage(bucket.key_for(V4))

    detail = run_json("inspect", "--policy", "bursty", "--identity", "203.0.113.7")
    tat_us = int(float(detail["stored"]["tat"]))
    assert tat_us == pytest.approx(redis_now_us(redis_client) + 90_000_000, abs=5_000_000)
    assert (detail["remaining"], detail["allowed"]) == (1, True)  # one more may come now
    assert redis_client.exists(bucket.key_for(V4))  # inspecting consumed nothing
    hit(bucket, V4)
    assert (
        run_json("inspect", "--policy", "bursty", "--identity", "203.0.113.7")["allowed"] is False
    )

    run("reset", "--policy", "bursty", "--yes")
    assert not redis_client.exists(bucket.key_for(V4))


def test_check_shows_a_token_buckets_units_without_consuming(redis_client):
    bucket = add_policy(
        "bursty", "api:items", algorithm="token_bucket", limit=2, window=60, burst=4, key="ip"
    )
    hit(bucket, V4, times=4)  # the burst is spent
    before = redis_client.get(bucket.key_for(V4))
    text = run("check", "--path", "/api/items/", "--ip", "203.0.113.7")
    row = row_of(text, "bursty")
    assert row[2:4] == ["2 per 60 s, burst 4", "token_bucket"]
    assert row[7] == "0" and re.fullmatch(r"denied \(\d+\.\d s\)", row[8])
    record = run_json("check", "--path", "/api/items/", "--ip", "203.0.113.7")
    (found,) = record["policies"]
    assert (found["policy"], found["limit"], found["remaining"]) == ("bursty", 2, 0)
    assert record["allowed"] is False
    assert 29 <= record["retry_after"] <= 30  # one unit frees every 30 s
    assert redis_client.get(bucket.key_for(V4)) == before  # a look, not a request


# ------------------------------------------------------------------------ concurrency


def take(policy: CompiledPolicy, who: str, times: int = 1) -> list[Any]:
    """``times`` requests of ``who`` admitted and still in progress: their receipts."""
    receipts = []
    for _ in range(times):
        verdict = limiter.decide([limiter.Check(policy, who)])
        assert verdict.allowed and verdict.receipt is not None
        receipts.append(verdict.receipt)
    return receipts


def test_policies_show_counts_and_concurrency_in_the_rate():
    add_policy("login", "api:login", limit=5, window=60, counts="failures")
    add_policy("pool", "api:export", algorithm="concurrency", limit=2, window=30)
    text = run("policies")
    assert row_of(text, "login")[3:5] == ["sliding_log", "5 per 60 s, failures only"]
    assert row_of(text, "pool")[3:5] == ["concurrency", "2 at once, lease 30 s"]
    rows = {r["name"]: r for r in run_json("policies")}
    assert (rows["login"]["counts"], rows["login"]["rate"]) == (
        "failures",
        "5 per 60 s, failures only",
    )
    assert (rows["pool"]["algorithm"], rows["pool"]["counts"]) == ("concurrency", "all")


def test_a_concurrency_key_through_keys_inspect_and_reset(redis_client):
    pool = add_policy("pool", algorithm="concurrency", limit=3, window=60)
    key = pool.key_for(V4)
    started_us = redis_now_us(redis_client)
    first, _ = take(pool, V4, times=2)
    # A request admitted 100 s ago whose response never ended: its 60 s lease is over.
    old_us = started_us - 100_000_000
    assert limiter.decide([limiter.Check(pool, V4)], now=old_us / 1_000_000).allowed
    # Three leases (scored by when they end), and the running total "#" (scored minus the
    # units held).
    assert redis_client.zcount(key, "(0", "+inf") == 3

    record = by_key(run_json("keys"))[key]
    assert (record["algorithm"], record["count"], record["limit"]) == ("concurrency", 2, 3)
    assert record["remaining"] == 1
    assert 55 < record["ttl"] <= 60 and record["memory"] == redis_client.memory_usage(key)

    before = redis_client.dump(key)
    detail = run_json("inspect", key)
    assert (detail["count"], detail["remaining"], detail["allowed"]) == (2, 1, True)
    ended, *live = detail["leases"]
    assert ended["started"] == iso(old_us) and ended["ends"] == iso(old_us + 60_000_000)
    assert ended["ended"] is True and ended["ends_in"] == 0
    assert 100 <= ended["age"] < 105
    assert [lease["ended"] for lease in live] == [False, False]
    for lease in live:
        assert 0 <= lease["age"] < 5
        assert lease["ends_in"] == pytest.approx(60 - lease["age"], abs=0.001)
    assert "windows" not in detail and "entries" not in detail

    text = run("inspect", "--policy", "pool", "--identity", "203.0.113.7")
    lines = text.splitlines()
    assert "policy     pool: concurrency, 3 at once, lease 60 s, enforce" in lines
    assert "count      2 of 3" in lines
    assert "leases     2 in progress, 1 ended" in lines
    assert cells(lines[lines.index("leases     2 in progress, 1 ended") + 1]) == [
        "#",
        "started",
        "age",
        "ends in",
    ]
    old = row_of(text, "1")
    assert old[:2] == ["1", iso(old_us)] and old[3:] == ["-", "ended"]
    assert re.fullmatch(r"10\d\.\d s", old[2])
    newest = row_of(text, "3")
    assert re.fullmatch(r"\d\.\d s", newest[2]) and re.fullmatch(r"(5\d|60)\.\d s", newest[3])
    assert len(newest) == 4
    assert redis_client.dump(key) == before  # looking took no slot

    limiter.give_back(first, 200)
    assert run_json("inspect", key)["count"] == 1
    assert "leases     1 in progress, 1 ended" in run("inspect", key).splitlines()

    assert run("reset", "--policy", "pool", "--yes").splitlines() == [
        key,
        "Deleted 1 key for policy pool.",
    ]
    assert not redis_client.exists(key)
    assert run_json("inspect", key)["leases"] == []


def test_check_of_a_concurrency_policy_takes_no_slot(redis_client):
    pool = add_policy("pool", "api:items", algorithm="concurrency", limit=1, window=60)
    key = pool.key_for(V4)
    (receipt,) = take(pool, V4)
    before = redis_client.dump(key)
    text = run("check", "--path", "/api/items/", "--ip", "203.0.113.7")
    row = row_of(text, "pool")
    assert row[2:4] == ["1 at once, lease 60 s", "concurrency"]
    assert row[6:8] == ["1", "0"] and re.fullmatch(r"denied \(\d+\.\d s\)", row[8])
    assert "The next request would be denied by pool; retry in" in text
    assert redis_client.dump(key) == before

    limiter.give_back(receipt, 200)
    assert not redis_client.exists(key)  # the last slot given back: nothing left
    for _ in range(3):
        record = run_json("check", "--path", "/api/items/", "--ip", "203.0.113.7")
        (found,) = record["policies"]
        assert (found["count"], found["remaining"], found["allowed"]) == (0, 1, True)
    assert not redis_client.exists(key)  # three looks, no lease
