"""Calendar quotas and lockouts as a client sees them through the middleware, on the
Redis clock: Retry-After and the RateLimit fields say when it may come back."""

from __future__ import annotations

import datetime as dt
import math
from zoneinfo import ZoneInfo

import pytest

from tests.helpers import create_policy

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.urls")]


def seconds_to_next_month(zone: str) -> float:
    now = dt.datetime.now(ZoneInfo(zone))
    first = dt.datetime(now.year + now.month // 12, now.month % 12 + 1, 1, tzinfo=ZoneInfo(zone))
    return first.timestamp() - now.timestamp()


@pytest.mark.parametrize("zone", ["Pacific/Auckland", "America/New_York"])
def test_over_a_monthly_quota_the_client_waits_for_the_first_local_time(client, zone):
    create_policy(
        "quota", "/sync/", limit=3, algorithm="fixed_window", calendar="month", time_zone=zone
    )
    for _ in range(3):
        assert client.get("/sync/").status_code == 200
    response = client.get("/sync/")
    assert response.status_code == 429
    expected = seconds_to_next_month(zone)
    assert abs(int(response["Retry-After"]) - math.ceil(expected)) <= 2
    assert response["RateLimit-Policy"] == f'"quota";q=3;w={30 * 86400}'
    t = int(response["RateLimit"].split("t=")[1])
    assert abs(t - math.ceil(expected)) <= 2


def test_a_sign_in_lockout_through_the_middleware(client):
    create_policy("sign-in", "/sync/", limit=2, window=60, lockout=600)
    assert client.get("/sync/").status_code == 200
    assert client.get("/sync/").status_code == 200
    first = client.get("/sync/")
    assert first.status_code == 429
    assert int(first["Retry-After"]) == 600
    assert first["RateLimit"] == '"sign-in";r=0;t=600'
    again = client.get("/sync/")
    assert again.status_code == 429
    assert 598 <= int(again["Retry-After"]) <= 600
