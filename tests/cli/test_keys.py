"""``manage.py ratelimits keys``: the live keys with their counts, found by SCAN in the real
Redis, selected by policy, identity or glob, without consuming."""

from __future__ import annotations

import json
import math
import re
from io import StringIO
from typing import Any

import pytest

from ratelimits.cli import output
from ratelimits.engine.keys.names import build_key
from ratelimits.models import Policy
from ratelimits.tools import inventory
from tests.cli.traffic import (
    SECRET,
    V4,
    add_policy,
    all_keys,
    by_key,
    counter_traffic,
    dumps,
    estimate,
    hit,
    mid_window,
    peek,
    redis_now_us,
    refused,
    row_of,
    scan_calls,
)
from tests.helpers import Terminal, cells, run, run_json

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("backend")]


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
