"""``manage.py ratelimits traffic``: after known traffic through the live site (honest
clients at known rates, one abuser), what a limit would have denied is within the stated
bounds of the truth computed from the same requests."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError
from django.test import Client

from ratelimits.engine.reporting import stats
from ratelimits.engine.traffic import record
from ratelimits.models import Policy
from tests.helpers import decide_calls, redis_now_us, run, run_json

pytestmark = pytest.mark.django_db

LIMIT = 20
#: Requests each client makes in the window: honest ones at known rates, one abuser.
HONEST = {f"198.51.100.{i}": n for i, n in enumerate([1, 2, 3, 3, 5, 7, 9, 11, 12, 14, 17, 19])}
ABUSER = {"203.0.113.66": 70}


def drive(client: Client, uses: dict[str, int]) -> None:
    for address, n in uses.items():
        for _ in range(n):
            client.get("/api/search/", REMOTE_ADDR=address)


def truth(uses: dict[str, int], limit: int) -> tuple[int, int]:
    """Clients and requests a fixed window of ``limit`` denies: those over it."""
    return (
        sum(1 for n in uses.values() if n > limit),
        sum(max(0, n - limit) for n in uses.values()),
    )


@pytest.fixture
def search(redis_client) -> Policy:
    # A day's fixed window: the test's requests all fall in one window (checked below).
    return Policy.objects.create(
        name="search",
        endpoint="search",
        algorithm="fixed_window",
        limit=LIMIT,
        window=86400,
        key="ip",
    )


def test_what_if_is_within_its_bounds_of_the_truth(search, redis_client):
    uses = {**HONEST, **ABUSER}
    started = redis_now_us(redis_client)
    calls = decide_calls(redis_client)
    drive(Client(), uses)
    assert redis_now_us(redis_client) // 86_400_000_000 == started // 86_400_000_000
    requests = sum(uses.values())
    # The record cost no call: one decide call per request, less the abuser's denials
    # that the worker answered itself (remembered denials, no Redis at all).
    assert decide_calls(redis_client) - calls <= requests
    stats.flush()
    record.flush()
    for limit in (1, 2, 4, 6, 9, 10, 12, 15, 18, 19, LIMIT, 25, 100):
        report = run_json("traffic", "search", "--since", "1h", "--what-if", str(limit))
        clients, denied = truth(uses, limit)
        what_if = report["what_if"]
        low, high = what_if["clients_denied_bounds"]
        assert low <= clients <= high, (limit, what_if, clients)
        assert low <= what_if["clients_denied"] <= high
        r_low, r_high = what_if["requests_denied_bounds"]
        assert r_low <= denied <= r_high, (limit, what_if, denied)
        assert r_low <= what_if["requests_denied"] <= r_high
    assert report["requests"] == requests
    assert report["denied"] == truth(uses, LIMIT)[1]
    assert report["clients"] == len(uses)
    levels = {level["at_least"]: level["clients"] for level in report["levels"]}
    assert levels[1] == 13 and levels[10] == sum(1 for n in uses.values() if n >= 10)
    assert levels[20] == 1  # the abuser reached the limit; nobody can be seen past it
    # 12 of 13 clients stayed under 20 (92 %, not 99 %): the level 99 % stayed under is
    # past the limit, so the suggestion is the limit's next level times the headroom.
    assert report["suggested_limit"] == 32


def test_a_level_of_the_scale_is_exact(search, redis_client):
    uses = {**HONEST, **ABUSER}
    drive(Client(), uses)
    record.flush()
    report = run_json("traffic", "search", "--what-if", "12")  # 13 is a level: exact
    assert report["what_if"]["clients_denied_bounds"] == [4, 4]
    assert report["what_if"]["clients_denied"] == truth(uses, 12)[0] == 4


def test_the_table_and_the_json_schema(search, redis_client):
    drive(Client(), {"198.51.100.1": 3, "198.51.100.2": 25})
    record.flush()
    report = run_json("traffic", "search", "--since", "24h", "--what-if", "2")
    assert set(report) >= {
        "policy",
        "since",
        "clients",
        "requests",
        "levels",
        "what_if",
        "suggested_limit",
    }
    assert set(report["what_if"]) >= {
        "limit",
        "clients_denied",
        "clients_denied_bounds",
        "requests_denied",
        "requests_denied_bounds",
    }
    assert (report["policy"], report["since"], report["clients"], report["requests"]) == (
        "search",
        "24h",
        2,
        28,
    )
    text = run("traffic", "search", "--what-if", "2")
    assert "use reached" in text and "<- the limit" in text
    assert "A limit of 2 would have denied about 2 clients" in text


def test_bad_input_is_a_clear_error(search):
    with pytest.raises(CommandError, match="no policy 'serch'"):
        run("traffic", "serch")
    with pytest.raises(CommandError, match="1h to 7d"):
        run("traffic", "search", "--since", "30d")
    with pytest.raises(CommandError, match="number of hours or days"):
        run("traffic", "search", "--since", "yesterday")
    with pytest.raises(CommandError, match="1 or more"):
        run("traffic", "search", "--what-if", "0")


def test_no_traffic_says_so(search):
    assert "Nothing recorded" in run("traffic", "search")
    assert run_json("traffic", "search")["what_if"] is None
