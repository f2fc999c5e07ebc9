"""A token bucket's and a concurrency policy's keys through ``policies``, ``keys``,
``inspect``, ``reset`` and ``check``."""

from __future__ import annotations

import re

import pytest

from ratelimits.engine import limiter
from tests.cli.traffic import V4, add_policy, by_key, hit, iso, redis_now_us, row_of, take
from tests.helpers import cells, run, run_json

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("backend")]


def test_a_token_bucket_key_through_keys_inspect_and_reset(redis_client):
    bucket = add_policy("bursty", algorithm="token_bucket", limit=2, window=60, burst=4)
    hit(bucket, V4, times=3)  # 3 of a burst of 4; one unit frees every 30 s
    record = by_key(run_json("keys"))[bucket.key_for(V4)]
    assert (record["algorithm"], record["limit"], record["remaining"]) == ("token_bucket", 2, 1)
    # a unit frees every 30 s, so the count drifts down by 0.033 per second between the hits
    # and the read; 0.1 allows three seconds of a slow machine and still tells 3 from 2 or 4
    assert record["count"] == pytest.approx(3, abs=0.1)
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
    # One unit frees every 30 s; a loaded machine may take seconds to get here.
    assert 25 <= record["retry_after"] <= 30
    assert redis_client.get(bucket.key_for(V4)) == before  # a look, not a request


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
