"""Calendar windows replayed on a fixed clock against the real script: counts reset at the
local midnight that starts a day, a week or a month, across DST changes and month ends."""

from __future__ import annotations

import datetime as dt
import threading
from zoneinfo import ZoneInfo

import pytest

from ratelimits.engine import limiter
from ratelimits.engine.policy import periods
from ratelimits.engine.policy.compiled import Check
from tests.helpers import IDENTITY, hit, policy

pytestmark = pytest.mark.usefixtures("backend")


def at(text: str, zone: str) -> float:
    """The instant of local time ``text`` (``2026-03-08 01:59:59``) in ``zone``."""
    return dt.datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp()


def quota(calendar: str, zone: str, limit: int = 2, **fields: object):
    return policy("fixed_window", limit, 60, calendar=calendar, time_zone=zone, **fields)


def exhaust_and_cross(p, before: float, after: float) -> None:
    """Spend the whole quota at ``before``, see the next denied, then admitted at ``after``."""
    for _ in range(p.limit):
        assert hit(p, before).allowed
    assert not hit(p, before).allowed
    assert hit(p, after).allowed


@pytest.mark.parametrize(
    ("zone", "last_second", "midnight", "hours"),
    [
        # DST starts: the day is 23 hours long.
        ("America/New_York", "2026-03-08 23:59:59", "2026-03-09 00:00:00", 23),
        # DST ends: the day is 25 hours long.
        ("America/New_York", "2026-11-01 23:59:59", "2026-11-02 00:00:00", 25),
        ("Europe/Berlin", "2026-03-29 23:59:59", "2026-03-30 00:00:00", 23),
        ("Europe/Berlin", "2026-10-25 23:59:59", "2026-10-26 00:00:00", 25),
        ("Pacific/Auckland", "2026-09-27 23:59:59", "2026-09-28 00:00:00", 23),
        ("Pacific/Auckland", "2026-04-05 23:59:59", "2026-04-06 00:00:00", 25),
    ],
)
def test_a_day_across_a_dst_change_resets_at_local_midnight(zone, last_second, midnight, hours):
    p = quota("day", zone)
    start = at(last_second[:10] + " 00:00:00", zone)
    ends = at(midnight, zone)
    assert ends - start == hours * 3600
    # Spent early in the day, it stays spent to the day's last second, DST or not.
    for _ in range(2):
        assert hit(p, start + 60).allowed
    denied = hit(p, at(last_second, zone))
    assert not denied.allowed
    assert denied.retry_after == pytest.approx(1.0)
    assert hit(p, ends).allowed


def test_the_day_the_clocks_change_counts_from_its_real_midnight():
    """New York, 2026-03-08: 02:00 does not exist; the day started at 05:00 UTC and the
    next one starts at 04:00 UTC, 23 hours later."""
    p = quota("day", "America/New_York", limit=1)
    assert hit(p, at("2026-03-08 00:00:00", "America/New_York")).allowed
    denied = hit(p, at("2026-03-08 03:00:00", "America/New_York"))  # after the jump
    assert not denied.allowed
    assert denied.retry_after == pytest.approx(21 * 3600)  # 03:00 EDT to midnight EDT


@pytest.mark.parametrize(
    ("last_second", "first_second"),
    [
        ("2028-02-29 23:59:59", "2028-03-01 00:00:00"),  # a leap year's February
        ("2027-02-28 23:59:59", "2027-03-01 00:00:00"),  # a common year's
        ("2026-12-31 23:59:59", "2027-01-01 00:00:00"),  # into January
        ("2026-04-30 23:59:59", "2026-05-01 00:00:00"),  # a 30-day month
    ],
)
def test_a_month_resets_on_the_first(last_second, first_second):
    zone = "Europe/Berlin"
    p = quota("month", zone)
    exhaust_and_cross(p, at(last_second, zone), at(first_second, zone))


def test_february_28_of_a_leap_year_is_still_february():
    zone = "UTC"
    p = quota("month", zone, limit=1)
    assert hit(p, at("2028-02-01 00:00:00", zone)).allowed
    denied = hit(p, at("2028-02-28 12:00:00", zone))
    assert not denied.allowed
    assert denied.retry_after == pytest.approx(36 * 3600)  # 29 Feb is still to come


def test_a_week_starts_on_monday_midnight():
    zone = "Europe/Berlin"
    p = quota("week", zone)
    # 2026-11-29 is a Sunday, 2026-11-30 a Monday.
    assert dt.date(2026, 11, 30).weekday() == 0
    exhaust_and_cross(p, at("2026-11-29 23:59:59", zone), at("2026-11-30 00:00:00", zone))
    # Wednesday is the same week as Monday.
    assert hit(p, at("2026-12-02 12:00:00", zone)).allowed
    assert not hit(p, at("2026-12-06 23:59:59", zone)).allowed


def test_the_fourth_of_three_per_month_in_auckland_waits_for_the_first_auckland_time():
    zone = "Pacific/Auckland"
    p = quota("month", zone, limit=3)
    now = at("2026-11-24 15:30:00", zone)
    for _ in range(3):
        assert hit(p, now).allowed
    denied = hit(p, now)
    assert not denied.allowed
    first = at("2026-12-01 00:00:00", zone)
    assert denied.retry_after == pytest.approx(first - now)
    assert denied.reset == pytest.approx(first - now)
    # Just before the first (in UTC still 30 November), still the November quota.
    assert not hit(p, first - 0.001).allowed
    assert hit(p, first).allowed


def test_the_same_instant_is_another_day_in_another_zone():
    """23:30 UTC on 30 November is already 1 December in Auckland: a new month there."""
    instant = dt.datetime(2026, 11, 30, 23, 30, tzinfo=dt.UTC).timestamp()
    utc = quota("month", "UTC", limit=1, name="utc")
    auckland = quota("month", "Pacific/Auckland", limit=1, name="nz")
    assert hit(utc, instant - 86400).allowed and hit(auckland, instant - 86400).allowed
    assert not hit(utc, instant).allowed  # still November in UTC
    assert hit(auckland, instant).allowed  # December in Auckland


def test_boundaries_name_the_period_its_end_and_the_next_end():
    zone = ZoneInfo("America/New_York")
    start, end, after = periods.boundaries("month", zone, at("2026-03-15 12:00:00", str(zone)))
    assert start == at("2026-03-01 00:00:00", str(zone)) * 1000
    assert end == at("2026-04-01 00:00:00", str(zone)) * 1000
    assert after == at("2026-05-01 00:00:00", str(zone)) * 1000
    # March loses an hour to DST: 30 days and 23 hours.
    assert end - start == (31 * 24 - 1) * 3_600_000


@pytest.mark.usefixtures("patient_redis")
def test_a_calendar_window_is_exact_under_concurrency():
    """32 threads race for a monthly quota of 25 on the Redis clock: exactly 25 admitted."""
    p = quota("month", "Europe/Berlin", limit=25)
    admitted: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(32)

    def client() -> None:
        start.wait(timeout=10)
        for _ in range(3):
            verdict = limiter.decide([Check(p, IDENTITY)])
            with lock:
                admitted.append(verdict.allowed)

    threads = [threading.Thread(target=client) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(admitted) == 96
    assert sum(admitted) == 25


def test_the_worker_sends_the_boundaries_of_its_clock_s_period():
    p = quota("day", "UTC")
    valid_until, args, _, _ = p.current_period()
    start, end, _ = args[0][2].split(",")
    assert valid_until == int(end) / 1000
    assert int(start) / 1000 <= dt.datetime.now(dt.UTC).timestamp() < valid_until


def test_a_lockout_rides_on_the_window_slot_of_a_calendar_policy():
    p = quota("day", "UTC", lockout=900)
    assert p.args_at(at("2026-11-24 12:00:00", "UTC"))[0][2].endswith("+900000")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"calendar": "year"}, "calendar must be one of"),
        ({"calendar": "month", "algorithm": "sliding_log"}, "Only a fixed_window policy counts"),
        ({"calendar": "month", "time_zone": "Mars/Olympus"}, "not a known time zone"),
    ],
)
def test_the_engine_refuses_what_it_cannot_count(fields, message):
    values = {"algorithm": "fixed_window", "limit": 2, "window": 60, **fields}
    with pytest.raises(ValueError, match=message):
        policy(**values)
