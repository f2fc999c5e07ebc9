"""``manage.py ratelimits policies``: every policy as a row, as a table and as JSON."""

from __future__ import annotations

import pytest

from tests.cli.traffic import add_policy
from tests.helpers import cells, run, run_json

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("backend")]


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
            "lockout_until_lifted": False,
            "extend_lockout": False,
            "reset_on_success": False,
            "ipv6_prefix": None,
            "traffic": True,
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
            "lockout_until_lifted": False,
            "extend_lockout": False,
            "reset_on_success": False,
            "ipv6_prefix": None,
            "traffic": True,
            "rate": "3 per 60 s",
            "overrides": 0,
            "matches_nothing": False,
            "nearest_match": None,
        },
    ]


def test_policies_without_any():
    assert run("policies") == "No policies. Add them in the admin or with `ratelimits import`.\n"
    assert run_json("policies") == []
