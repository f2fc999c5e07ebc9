"""``manage.py ratelimits inspect``: one key's full state for each algorithm, read without
changing it."""

from __future__ import annotations

import math
import re

import pytest

from ratelimits.engine import limiter
from ratelimits.models import Policy
from ratelimits.tools import inspection
from tests.cli.traffic import (
    V4,
    add_policy,
    all_keys,
    counter_traffic,
    dumps,
    estimate,
    hit,
    iso,
    mid_window,
    peek,
    redis_now_us,
    refused,
    row_of,
)
from tests.helpers import cells, run, run_json

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("backend")]


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
            "expected rl:{<identity>}:<policy>:<log|ring|counter|fixed|bucket|leases|lock>."
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
