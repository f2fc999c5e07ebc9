"""Per-minute request counts: buffered in the process, flushed to the real Redis in the
background, read back for the admin's dashboard; and their SVG chart."""

from __future__ import annotations

import logging
import os
import threading
import time
import xml.etree.ElementTree as ET
from typing import Any

import pytest
import redis
from django.conf import settings
from django.core.checks import run_checks
from django.test import override_settings

from ratelimits.admin.chart import render_all, render_svg
from ratelimits.engine.decision import Decision, Verdict
from ratelimits.engine.reporting import stats
from ratelimits.engine.store import connection
from ratelimits.engine.store.breaker import breaker
from ratelimits.models import Policy
from ratelimits.testutils import free_port
from ratelimits.tools import stats_reading
from ratelimits.tools.stats_reading import Series
from tests.helpers import caches_at, count_verdict, ratelimits_settings

SVG = "{http://www.w3.org/2000/svg}"
#: Seconds a test waits for the background flusher before it fails: far beyond what even a
#: loaded machine takes.
WAIT = 30.0


def decision(policy: str, *, allowed: bool = True, enforce: bool = True, failed=False):
    return Decision(
        policy=policy,
        identity="ip:203.0.113.7",
        allowed=allowed,
        enforce=enforce,
        limit=10,
        window=60,
        count=0.0,
        remaining=0,
        retry_after=0.0,
        reset=0.0,
        failed=failed,
    )


ALLOWED = Verdict((decision("a"),))
DENIED = Verdict((decision("a", allowed=False),))
SHADOW = Verdict((decision("a"), decision("s", allowed=False, enforce=False)))
# b admits, c denies: the request is denied, b's admission is not counted.
MIXED = Verdict((decision("b"), decision("c", allowed=False)))
FAILED = Verdict((decision("o", failed=True), decision("x", allowed=False, failed=True)))


def minute_of(t: float) -> int:
    return int(t // 60)


def stored(client: redis.Redis, minute: int) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in client.hgetall(f"rl:stats:{minute}").items()}


def dead_redis(**ratelimits: Any) -> override_settings:
    """Settings pointing the limiter at a port where nothing listens."""
    return override_settings(
        CACHES=caches_at(free_port()), RATELIMITS=ratelimits_settings(**ratelimits)
    )


def command_calls(client: redis.Redis) -> dict[str, int]:
    found = client.info("commandstats")
    return {name: s["calls"] for name, s in found.items() if name != "cmdstat_info"}


# Recording ------------------------------------------------------------------------------


@override_settings(RATELIMITS={"METRICS_FLUSH_INTERVAL": 3600})
def test_record_does_no_redis_io(redis_client):
    """A lock and a few dict increments: no command reaches Redis (its cost in time is
    bench's to measure, not a test's on whatever machine runs it)."""
    before = command_calls(redis_client)
    for _ in range(5000):
        count_verdict(ALLOWED)
        count_verdict(SHADOW)
    assert command_calls(redis_client) == before
    assert redis_client.keys("rl:stats:*") == []
    (m,) = {minute for minute, _, _ in stats.pending()}
    assert stats.pending() == {
        (m, "a", "allowed"): 10_000,
        (m, "s", "shadow_denied"): 5000,
    }


def test_outcomes_are_classified_like_stats(redis_client):
    now = time.time()
    for verdict in (ALLOWED, DENIED, SHADOW, MIXED, FAILED):
        count_verdict(verdict, now=now)
    m = minute_of(now)
    assert stats.pending() == {
        (m, "a", "allowed"): 2,
        (m, "a", "denied"): 1,
        (m, "s", "shadow_denied"): 1,
        (m, "b", "not_counted"): 1,
        (m, "c", "denied"): 1,
        (m, "o", "failed_open"): 1,
        (m, "x", "failed_closed"): 1,
    }


# Flushing -------------------------------------------------------------------------------


def test_flush_writes_exact_counts_to_minute_keys_with_a_ttl(redis_client):
    now = time.time()
    earlier = now - 120
    for _ in range(3):
        count_verdict(ALLOWED, now=now)
    count_verdict(DENIED, now=now)
    count_verdict(SHADOW, now=earlier)
    count_verdict(FAILED, now=earlier)
    assert stats.flush() is True
    assert stats.pending() == {}
    assert stored(redis_client, minute_of(now)) == {"a:allowed": 3, "a:denied": 1}
    assert stored(redis_client, minute_of(earlier)) == {
        "a:allowed": 1,
        "s:shadow_denied": 1,
        "o:failed_open": 1,
        "x:failed_closed": 1,
    }
    for minute in (minute_of(now), minute_of(earlier)):
        assert 7100 < redis_client.ttl(f"rl:stats:{minute}") <= stats.KEY_TTL
    assert sorted(redis_client.keys("rl:stats:*")) == sorted(
        f"rl:stats:{m}".encode() for m in (minute_of(now), minute_of(earlier))
    )


def test_flush_is_one_round_trip_and_nothing_when_empty(redis_client):
    assert stats.flush() is True  # nothing buffered: no command at all
    now = time.time()
    count_verdict(ALLOWED, now=now)
    count_verdict(DENIED, now=now - 60)
    connection.get_client().ping()  # connected before counting commands
    before = command_calls(redis_client)
    stats.flush()
    after = command_calls(redis_client)
    changed = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert changed == {"cmdstat_hincrby": 2, "cmdstat_expire": 2}


def test_two_flushes_add_up(redis_client):
    now = time.time()
    count_verdict(ALLOWED, now=now)
    stats.flush()
    count_verdict(ALLOWED, now=now)
    count_verdict(DENIED, now=now)
    stats.flush()
    assert stored(redis_client, minute_of(now)) == {"a:allowed": 2, "a:denied": 1}


def test_flushes_use_the_key_prefix(redis_client):
    now = time.time()
    with override_settings(RATELIMITS={**settings.RATELIMITS, "KEY_PREFIX": "app2"}):
        count_verdict(DENIED, now=now)
        stats.flush()
        assert stats_reading.denied_since(1, now=now) == {"a": 1}
    assert redis_client.hgetall(f"app2:stats:{minute_of(now)}") == {b"a:denied": b"1"}
    assert stats_reading.denied_since(1, now=now) == {}


def test_a_redis_outage_keeps_the_counts_and_delivers_them_once(redis_client):
    now = time.time()
    count_verdict(ALLOWED, now=now)
    with dead_redis(BREAKER_COOLDOWN=0.05):
        assert stats.flush() is False
        count_verdict(DENIED, now=now)
        assert stats.flush() is False
        assert stats.flush() is False  # the third failure opens the breaker
        assert breaker.is_open
        count_verdict(ALLOWED, now=now)
        assert stats.flush() is False  # the breaker is open: not even tried
    m = minute_of(now)
    assert stats.pending() == {(m, "a", "allowed"): 2, (m, "a", "denied"): 1}
    assert redis_client.keys("rl:stats:*") == []
    time.sleep(0.06)  # the cooldown passes: the flusher is the breaker's probe
    assert stats.flush() is True
    assert not breaker.is_open  # a successful flush closed the breaker
    assert stats.pending() == {}
    assert stats.flush() is True
    assert stored(redis_client, m) == {"a:allowed": 2, "a:denied": 1}


def test_the_buffer_drops_minutes_older_than_an_hour(redis_client, caplog):
    now = time.time()
    count_verdict(ALLOWED, now=now - 61 * 60)
    count_verdict(ALLOWED, now=now - 61 * 60)
    count_verdict(DENIED, now=now - 59 * 60)
    count_verdict(ALLOWED, now=now)
    with dead_redis(), caplog.at_level(logging.WARNING, logger="ratelimits"):
        assert stats.flush(now=now) is False
        assert {minute for minute, _, _ in stats.pending()} == {
            minute_of(now - 59 * 60),
            minute_of(now),
        }
        assert stats.flush(now=now + 120) is False  # two minutes later, still down
        assert stats.pending() == {(minute_of(now), "a", "allowed"): 1}
    dropped = [m for m in caplog.messages if "dropped" in m]
    assert len(dropped) == 2 and dropped[0].startswith("ratelimits: dropped 2 request counts")


def test_a_foreign_value_at_a_stats_key_drops_only_its_counts(redis_client, caplog):
    now = time.time()
    redis_client.set(f"rl:stats:{minute_of(now - 60)}", "not a hash")
    count_verdict(ALLOWED, now=now - 60)
    count_verdict(ALLOWED, now=now)
    with caplog.at_level(logging.ERROR, logger="ratelimits"):
        assert stats.flush() is True
    foreign = f"could not add 1 to a:allowed of rl:stats:{minute_of(now - 60)}"
    assert any(foreign in m for m in caplog.messages)
    assert stored(redis_client, minute_of(now)) == {"a:allowed": 1}
    assert stats.pending() == {}
    assert not breaker.is_open


# The background flusher -----------------------------------------------------------------


def flushers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ratelimits-metrics" and t.is_alive()]


@override_settings(RATELIMITS={"METRICS_FLUSH_INTERVAL": 0.05})
def test_the_background_thread_flushes_by_itself(redis_client, monkeypatch):
    """It flushes with no one calling :func:`stats.flush`, waiting the setting's interval
    each time (seen in what it waits, not in how long the machine took)."""
    waits: list[float] = []
    interval = stats._interval

    def noted_interval() -> float:
        waits.append(interval())
        return waits[-1]

    monkeypatch.setattr(stats, "_interval", noted_interval)
    assert flushers() == []
    now = time.time()
    started = time.monotonic()
    count_verdict(DENIED, now=now)
    assert len(flushers()) == 1
    while not redis_client.exists(f"rl:stats:{minute_of(now)}"):
        assert time.monotonic() - started < WAIT, f"no flush within {WAIT} s"
        time.sleep(0.01)
    assert waits and set(waits) == {0.05}, waits
    assert stored(redis_client, minute_of(now)) == {"a:denied": 1}
    count_verdict(DENIED, now=now)
    assert len(flushers()) == 1  # one thread per process
    stats.reset()
    assert flushers() == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@override_settings(RATELIMITS={"METRICS_FLUSH_INTERVAL": 3600})
def test_a_forked_child_starts_empty_with_its_own_flusher(redis_client):
    now = time.time()
    count_verdict(ALLOWED, now=now)  # the parent's, still unsent at the fork
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status, never return into pytest
        code = 1
        try:
            empty = stats.pending() == {}
            count_verdict(DENIED, now=now)
            has_flusher = len(flushers()) == 1
            code = 0 if empty and has_flusher and stats.flush() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert stored(redis_client, minute_of(now)) == {"a:denied": 1}  # the child's only
    stats.flush()
    assert stored(redis_client, minute_of(now)) == {"a:denied": 1, "a:allowed": 1}


# Reading back ---------------------------------------------------------------------------


def test_series_and_denied_since_read_back_exact_numbers(redis_client):
    now = time.time()
    m = minute_of(now)
    for _ in range(4):
        count_verdict(ALLOWED, now=now)
    count_verdict(DENIED, now=now)
    count_verdict(DENIED, now=now - 60)
    count_verdict(SHADOW, now=now - 3 * 60)
    count_verdict(DENIED, now=now - 10 * 60)  # outside 5 minutes
    count_verdict(FAILED, now=now - 60)
    stats.flush()
    redis_client.hset(f"rl:stats:{m}", mapping={"junk": 1, "a:bogus": 2, "a:denied2": "x"})

    read = stats_reading.series(minutes=5, now=now)
    assert read.minutes == [m - 4, m - 3, m - 2, m - 1, m]
    assert read.timestamps == [minute * 60 for minute in read.minutes]
    assert read.policies == ["a", "o", "s", "x"]
    assert read.counts["a"] == {
        "allowed": [0, 1, 0, 0, 4],
        "denied": [0, 0, 0, 1, 1],
        "shadow_denied": [0, 0, 0, 0, 0],
    }
    assert read.counts["s"] == {
        "allowed": [0] * 5,
        "denied": [0] * 5,
        "shadow_denied": [0, 1, 0, 0, 0],
    }
    assert read.counts["x"]["failed_closed"] == [0, 0, 0, 1, 0]
    assert read.total("a", "allowed") == 5

    only = stats_reading.series(["a", "quiet"], minutes=60, now=now)
    assert list(only.counts) == ["a", "quiet"]
    assert len(only.minutes) == 60 and only.minutes[-1] == m
    assert only.counts["quiet"] == {o: [0] * 60 for o in stats_reading.OUTCOMES}
    assert only.counts["a"]["denied"][-11:] == [1] + [0] * 8 + [1, 1]
    assert only.of("missing") == {o: [0] * 60 for o in stats_reading.OUTCOMES}

    assert stats_reading.denied_since(5, now=now) == {"a": 2, "o": 0, "s": 0, "x": 0}
    assert stats_reading.denied_since(1, now=now) == {"a": 1}
    assert stats_reading.denied_since(15, now=now)["a"] == 3
    with_failures = stats_reading.denied_since(5, now=now, outcomes=("denied", "failed_closed"))
    assert with_failures == {"a": 2, "o": 0, "s": 0, "x": 1}


def test_series_is_one_hgetall_per_minute(redis_client):
    before = command_calls(redis_client).get("cmdstat_hgetall", 0)
    assert stats_reading.series().counts == {}
    assert command_calls(redis_client)["cmdstat_hgetall"] - before == 60
    with pytest.raises(ValueError):
        stats_reading.series(minutes=0)


def test_series_raises_when_redis_is_down(redis_client):
    with dead_redis(), pytest.raises(redis.ConnectionError):
        stats_reading.series()


# Through the demo API -------------------------------------------------------------------


@pytest.mark.django_db
def test_requests_through_the_api_are_counted(client, redis_client):
    Policy.objects.create(name="items", endpoint="api:items", limit=2, window=60)
    Policy.objects.create(
        name="items-shadow", endpoint="/api/items/", limit=1, window=60, mode="shadow"
    )
    before = command_calls(redis_client)
    assert [client.get("/api/items/").status_code for _ in range(3)] == [200, 200, 429]
    calls = command_calls(redis_client)
    # Not yet sent (the scripts' own HINCRBY calls count too, but they use PEXPIRE).
    assert calls.get("cmdstat_expire") == before.get("cmdstat_expire")
    assert redis_client.keys("rl:stats:*") == []
    assert stats.flush() is True
    read = stats_reading.series(["items", "items-shadow"], minutes=2)
    assert read.total("items", "allowed") == 2
    assert read.total("items", "denied") == 1
    assert read.total("items-shadow", "allowed") == 1
    # The shadow policy would have denied the 2nd request (only admissions are stored).
    # The 3rd was denied by this worker without Redis (the 2nd used items' last unit:
    # ratelimits.engine.denials), so the shadow policy was not asked.
    assert read.total("items-shadow", "shadow_denied") == 1
    assert stats_reading.denied_since() == {"items": 1, "items-shadow": 0}


# Settings -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, "5", True, None])
def test_a_bad_flush_interval_is_e002(value):
    with override_settings(RATELIMITS={"METRICS_FLUSH_INTERVAL": value}):
        messages = [m for m in run_checks() if m.id == "ratelimits.E002"]
    assert len(messages) == 1 and "METRICS_FLUSH_INTERVAL" in messages[0].msg


# The chart ------------------------------------------------------------------------------


def a_series(policy: str = "login", n: int = 60, **rows: list[int]) -> Series:
    counts = {o: [0] * n for o in stats_reading.OUTCOMES} | rows
    return Series(minutes=list(range(1000, 1000 + n)), counts={policy: counts})


def polylines(root: ET.Element) -> dict[str, list[tuple[float, float]]]:
    found = {}
    for line in root.iter(f"{SVG}polyline"):
        points = [tuple(map(float, p.split(","))) for p in line.get("points", "").split()]
        found[line.get("data-outcome")] = points
    return found


def test_the_chart_is_well_formed_with_a_point_per_minute():
    allowed = [i % 7 for i in range(60)]
    denied = [1 if i % 10 == 0 else 0 for i in range(60)]
    svg = render_svg(a_series(allowed=allowed, denied=denied), "login", width=600, height=200)
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert root.get("role") == "img" and root.get("viewBox") == "0 0 600 200"
    assert root.find(f"{SVG}title").text == "Requests per minute for policy login, last 60 minutes"
    assert "174 allowed, 6 denied, 0 shadow-denied" in root.find(f"{SVG}desc").text
    lines = polylines(root)
    assert set(lines) == {"allowed", "denied", "shadow_denied"}  # no failures: no failed line
    for points in lines.values():
        assert len(points) == 60
        xs = [x for x, _ in points]
        assert xs == sorted(xs) and len(set(xs)) == 60  # oldest first, left to right
    ys = [y for _, y in lines["allowed"]]
    assert ys.index(min(ys)) == allowed.index(max(allowed))  # the peak is highest
    minutes = [r for r in root.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
    assert len(minutes) == 60
    assert minutes[-1].find(f"{SVG}title").text == (
        "this minute: 3 allowed, 0 denied, 0 shadow-denied"
    )
    assert minutes[0].find(f"{SVG}title").text.startswith("59 min ago: 0 allowed, 1 denied")
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "minutes ago" in texts and "requests / min" in texts and "now" in texts
    assert any(t and t.startswith("allowed (174)") for t in texts)
    dashes = {
        line.get("data-outcome"): line.get("stroke-dasharray")
        for line in root.iter(f"{SVG}polyline")
    }
    assert len(set(dashes.values())) == 3  # told apart without colour


def test_a_policy_name_is_escaped():
    name = '<script>alert("x")</script>&'
    svg = render_svg(a_series(name, allowed=[1] * 60), name)
    assert "<script" not in svg and "&lt;script&gt;" in svg
    root = ET.fromstring(svg)
    assert (
        root.find(f"{SVG}title").text == f"Requests per minute for policy {name}, last 60 minutes"
    )
    assert root.get("data-policy") == name


def test_zero_data_still_renders_axes():
    empty = Series(minutes=list(range(1000, 1060)), counts={})
    root = ET.fromstring(render_svg(empty, "quiet"))
    assert len(root.find(f"{SVG}g[@class='axes']")) == 2
    y_ticks = [t.text for t in root.find(f"{SVG}g[@class='y-ticks']")]
    assert y_ticks[0] == "0"
    x_ticks = [t.text for t in root.find(f"{SVG}g[@class='x-ticks']")]
    assert x_ticks[0] == "now" and "30" in x_ticks
    lines = polylines(root)
    assert set(lines) == {"allowed", "denied", "shadow_denied"}
    baseline = {y for points in lines.values() for _, y in points}
    assert len(baseline) == 1  # all on the zero line


def test_failures_get_their_own_line_and_each_policy_its_own_chart():
    failed = [0] * 59 + [4]
    read = Series(
        minutes=list(range(1000, 1060)),
        counts={
            "a": {o: [0] * 60 for o in stats_reading.OUTCOMES} | {"failed_closed": failed},
            "b": {o: [1] * 60 for o in stats_reading.OUTCOMES},
        },
    )
    charts = render_all(read)
    assert list(charts) == ["a", "b"]
    a, b = (ET.fromstring(svg) for svg in charts.values())
    assert polylines(a)["failed"][-1][1] < polylines(a)["failed"][0][1]
    assert "failed" not in polylines(b)
    assert a.get("aria-labelledby") != b.get("aria-labelledby")  # ids unique on one page


def test_the_y_axis_has_round_ticks():
    root = ET.fromstring(render_svg(a_series(allowed=[0] * 59 + [1234]), "login"))
    y_ticks = [t.text for t in root.find(f"{SVG}g[@class='y-ticks']")]
    assert y_ticks == ["0", "500", "1,000", "1,500"]
