"""Two real DRF projects' setups before and after ``adopt``, through Django's test client
against the test Redis: the same number of 200s and the same ``Retry-After`` from DRF's
throttles (on the django-redis cache) and from the adopted policies under
PolicyThrottle. The same-scope double spend (reproduced when every view spends the
counter twice, named and left on DRF when some spend it once); burst and sustained
throttles on each view at the root of the site; a view left on DRF sharing a counter;
the documented order of the steps, the reverse, and runs without a mode keeping modes."""

from __future__ import annotations

from types import ModuleType

import pytest
from django.test import override_settings
from rest_framework.throttling import (
    AnonRateThrottle,
    ScopedRateThrottle,
    SimpleRateThrottle,
    UserRateThrottle,
)
from rest_framework.views import APIView

from ratelimits.models import Policy
from ratelimits.testutils import reset_state
from ratelimits.throttling import PolicyThrottle
from tests.adopt import projects
from tests.adopt.conftest import switch_to_policies
from tests.adopt.test_replay import SEQUENCE
from tests.helpers import run

pytestmark = pytest.mark.django_db

Answers = list[tuple[int, str | None]]


def answers(clients, sequence) -> Answers:
    """Each request's status and ``Retry-After``."""
    found = []
    for who, path in sequence:
        response = clients[who].get(path)
        found.append((response.status_code, response.headers.get("Retry-After")))
    return found


def under_drf(monkeypatch, rates, defaults, site: ModuleType):
    """The site under DRF's throttles: ``rates`` and ``defaults`` patched where DRF bound
    them; a context manager."""
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)
    monkeypatch.setattr(APIView, "throttle_classes", defaults)
    return override_settings(ROOT_URLCONF=site)


def stored() -> dict[str, tuple[str, int, int, int, str]]:
    return {p.name: (p.endpoint, p.limit, p.window, p.cost, p.mode) for p in Policy.objects.all()}


def test_the_same_scope_double_spend_is_reproduced_when_every_view_spends_twice(
    clients, monkeypatch, redis_client
):
    sequence = [("alice", "/api/cart/")] * 3 + [("anonymous", "/api/cart/")] * 3
    defaults = [UserRateThrottle, ScopedRateThrottle]
    with under_drf(
        monkeypatch, projects.SHOP_RATES, defaults, projects.shop(items=False, adopted=set())
    ):
        before = answers(clients, sequence)
        out = run("adopt", "--mode", "enforce")
    # 4/min, two entries of throttle_user_<client> per request: 2 requests each.
    assert [status for status, _ in before] == [200, 200, 429] * 2
    assert before[2][1] == "60"
    assert (
        "created: drf-user: sliding_log, 4 per 60 s per user_or_ip, cost 2, endpoint user, "
        "enforce; replaces ScopedRateThrottle, UserRateThrottle 4/min (DRF spends 2 per "
        "request: 2 throttles on one counter) on 1 route"
    ) in out
    assert stored()["drf-user"] == ("user", 4, 60, 2, "enforce")

    redis_client.flushall()
    after_site = projects.shop(items=False, adopted={"cart", "uploads"})
    with switch_to_policies(monkeypatch, after_site):
        after = answers(clients, sequence)
    assert after == before


def test_a_double_spend_next_to_a_single_one_is_named_and_left_on_drf(
    clients, monkeypatch, redis_client
):
    sequence = [("alice", path) for path in ["/api/items/", "/api/cart/"] * 3]
    sequence += [("anonymous", "/api/uploads/")] * 3
    defaults = [UserRateThrottle, ScopedRateThrottle]
    with under_drf(
        monkeypatch, projects.SHOP_RATES, defaults, projects.shop(items=True, adopted=set())
    ):
        before = answers(clients, sequence)
        out = run("adopt", "--mode", "enforce")
    # items spends 1, cart 2 (the second recorded even when it denies): 200 200 200 429...
    assert [status for status, _ in before] == [200, 200, 200, 429, 429, 429, 200, 200, 429]
    assert (
        "skipped: ScopedRateThrottle, UserRateThrottle (scope user): DRF spends 2 of "
        "throttle_user_<client> per request on /api/cart/ (cart) (throttles of one scope"
    ) in out
    assert "  on /api/cart/ (cart)\n  on /api/items/ (items)\n" in out
    assert set(stored()) == {"drf-uploads"}  # the user counter stays on DRF, whole

    redis_client.flushall()
    with switch_to_policies(monkeypatch, projects.shop(items=True, adopted={"uploads"})):
        after = answers(clients, sequence)
    assert after == before


def test_burst_and_sustained_throttles_on_each_root_view_are_adopted_for_exactly_those_views(
    clients, monkeypatch, redis_client
):
    sequence = [("alice", path) for path in ["/accounts/", "/transactions.json", "/accounts/"]]
    sequence += [("anonymous", path) for path in ["/transactions/", "/accounts/", "/accounts/"]]
    sequence += [("alice", "/status/")] * 2 + [("anonymous", "/health/")] * 3
    site = projects.finance(adopted=False)
    with under_drf(monkeypatch, projects.FINANCE_RATES, [UserRateThrottle], site):
        before = answers(clients, sequence)
        summary = run("adopt", "--dry-run")
        routes = run("adopt", "--dry-run", "-v", "2")
        run("adopt", "--mode", "enforce")
    assert [status for status, _ in before] == [
        200,
        200,
        429,
        200,
        200,
        429,
        200,
        200,
        200,
        200,
        200,
    ]
    assert before[2][1] == before[5][1] == "60"
    assert stored() == {
        "drf-burst": ("accounts,transactions", 2, 60, 1, "enforce"),
        "drf-sustained": ("accounts,transactions", 3, 3600, 1, "enforce"),
        "drf-user": ("status", 5, 60, 1, "enforce"),
    }
    # One line per policy; -v 2 adds each route, the .<format> twins not repeated.
    lines = summary.split("Dry run")[0].splitlines()
    assert lines == [
        "would be created: drf-burst: sliding_log, 2 per 60 s per user_or_ip, endpoint "
        "accounts,transactions, shadow; replaces BurstRateThrottle 2/min on 2 routes",
        "would be created: drf-sustained: sliding_log, 3 per 3600 s per user_or_ip, endpoint "
        "accounts,transactions, shadow; replaces SustainedRateThrottle 3/hour on 2 routes",
        "would be created: drf-user: sliding_log, 5 per 60 s per user_or_ip, endpoint status, "
        "shadow; replaces UserRateThrottle 5/min on 1 route",
    ]
    assert "  replaces BurstRateThrottle 2/min on /accounts/ (accounts)\n" in routes
    assert "<format>" not in routes

    redis_client.flushall()
    with switch_to_policies(monkeypatch, projects.finance(adopted=True)):
        after = answers(clients, sequence)
    assert after == before


def test_a_view_left_on_drf_keeps_the_counter_it_shares_on_drf_and_is_named_with_the_effect(
    clients, monkeypatch, redis_client
):
    sequence = [("anonymous", path) for path in ["/api/public/", "/api/legacy/"] * 2]
    sequence += [("anonymous", "/api/uploads/")] * 3
    site = projects.shared(adopted=set())
    with under_drf(monkeypatch, projects.SHARED_RATES, [AnonRateThrottle], site):
        before = answers(clients, sequence)
        out = run("adopt", "--mode", "enforce")
    # One anonymous counter for both views: 3 in all, not 3 on each.
    assert [status for status, _ in before] == [200, 200, 200, 429, 200, 200, 429]
    assert (
        "skipped: AnonRateThrottle (scope anon): /api/legacy/ (legacy) spends DRF's counter "
        "throttle_anon_<client> too and stays on DRF (its view overrides get_throttles()); "
        "adopted, the other views would count apart from it: a client could get 3 there and "
        "3 on the others per 60 s instead of 3 in all"
    ) in out
    assert set(stored()) == {"drf-uploads"}

    redis_client.flushall()
    with switch_to_policies(monkeypatch, projects.shared(adopted={"uploads"})):
        after = answers(clients, sequence)
    assert after == before


@pytest.mark.usefixtures("drf_site")
def test_the_documented_order_shadow_then_switch_then_enforce(clients, monkeypatch, redis_client):
    before = answers(clients, SEQUENCE)
    run("adopt")
    assert {mode for *_, mode in stored().values()} == {"shadow"}
    redis_client.flushall()
    with switch_to_policies(monkeypatch):
        # The throttle classes are PolicyThrottle now: the policies are found by name.
        out = run("adopt", "--mode", "enforce")
        assert "updated (mode): drf-user: " in out and "Adopted: 0 created, 4 updated" in out
        assert {mode for *_, mode in stored().values()} == {"enforce"}
        again = run("adopt")
        assert "kept: drf-user (enforce): adopted earlier" in again
        assert "Nothing to change." in again
        assert {mode for *_, mode in stored().values()} == {"enforce"}
        reset_state()
        after = answers(clients, SEQUENCE)
    assert after == before


@pytest.mark.usefixtures("drf_site")
def test_the_reverse_order_enforce_then_switch(clients, monkeypatch, redis_client):
    before = answers(clients, SEQUENCE)
    run("adopt", "--mode", "enforce")
    out = run("adopt")  # no mode: each policy keeps its own
    assert "unchanged: drf-user: " in out and "Nothing to change." in out
    Policy.objects.filter(name="drf-anon").update(mode="shadow")  # an operator's choice
    run("adopt")
    assert stored()["drf-anon"][-1] == "shadow" and stored()["drf-user"][-1] == "enforce"
    run("adopt", "--mode", "enforce")
    redis_client.flushall()
    with switch_to_policies(monkeypatch):
        after = answers(clients, SEQUENCE)
    assert after == before
    assert PolicyThrottle in APIView.throttle_classes
