"""DRF's own throttle setups replayed before and after ``adopt``: the same requests get
the same statuses from DRF's throttles (on the django-redis cache) and from the adopted
policies under PolicyThrottle (in the same Redis, decided by the Lua)."""

from __future__ import annotations

import pytest

from ratelimits.models import Policy
from tests.adopt.conftest import switch_to_policies
from tests.helpers import run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("drf_site")]

ITEMS, ORDERS = "/api/shared/items/", "/api/shared/orders/"
UPLOADS, REPORTS, BURST = "/api/uploads/", "/api/reports/", "/api/burst/"
ANONYMOUS = "/api/anonymous/"

#: (who, path), in order. The user rate is 3/min shared by items and orders, for alice by
#: id and for the anonymous client by address; uploads and reports share the scope
#: uploads, 2/minute; burst is a UserRateThrottle subclass of its own rate, 2/min; the
#: anonymous view's AnonRateThrottle counts the anonymous client alone, 4/min.
SEQUENCE = [
    *[("anonymous", ITEMS), ("anonymous", ORDERS)] * 3,
    *[("alice", ORDERS), ("alice", ITEMS)] * 3,
    ("anonymous", UPLOADS),
    ("alice", REPORTS),
    ("anonymous", REPORTS),
    ("anonymous", UPLOADS),
    ("alice", UPLOADS),
    ("alice", REPORTS),
    *[("anonymous", BURST), ("alice", BURST)] * 3,
    *[("anonymous", ANONYMOUS), ("alice", ANONYMOUS)] * 5,
    ("anonymous", "/api/open/"),
]


def replay(clients, sequence):
    return [clients[who].get(path).status_code for who, path in sequence]


def test_adopted_policies_admit_what_drf_admitted(clients, monkeypatch, redis_client):
    before = replay(clients, SEQUENCE)
    assert before.count(429) == 11, before  # the sequence reaches every limit
    assert redis_client.keys("*throttle_user_*")  # DRF counted in the test Redis

    run("adopt", "--mode", "enforce")
    redis_client.flushall()  # DRF's counters gone: both start afresh
    with switch_to_policies(monkeypatch):
        after = replay(clients, SEQUENCE)

    assert after == before
    assert {p.name: (p.endpoint, p.key, p.limit, p.window) for p in Policy.objects.all()} == {
        "drf-user": ("/api/shared/*", "user_or_ip", 3, 60),
        "drf-uploads": ("uploads", "user_or_ip", 2, 60),
        "drf-burst": ("burst", "user_or_ip", 2, 60),
        "drf-anon": ("anonymous", "anon", 4, 60),
    }
    assert set(Policy.objects.values_list("algorithm", "mode").distinct()) == {
        ("sliding_log", "enforce")
    }


def test_the_plan_names_each_policy_and_with_v2_the_routes_it_replaces():
    summary = run("adopt", "--dry-run")
    assert (
        "would be created: drf-user: sliding_log, 3 per 60 s per user_or_ip, endpoint "
        "/api/shared/*, shadow; replaces UserRateThrottle 3/min on 2 routes\nskipped: " in summary
    )
    assert "  replaces" not in summary
    out = run("adopt", "--dry-run", "-v", "2")
    assert "would be created: drf-user: sliding_log, 3 per 60 s per user_or_ip, " in out
    assert (
        "  replaces UserRateThrottle 3/min on /api/shared/items/ (items) "
        "(DEFAULT_THROTTLE_CLASSES)" in out
    )
    assert "  replaces ScopedRateThrottle 2/minute on /api/reports/ (reports)" in out
    assert "  replaces BurstThrottle 2/min on /api/burst/ (burst)" in out
    assert Policy.objects.count() == 0
