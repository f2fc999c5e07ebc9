"""DRF's classic throttles, ``DEFAULT_THROTTLE_CLASSES = [AnonRateThrottle,
UserRateThrottle]``, replayed before and after ``adopt``: anonymous and signed-in clients
get the same statuses from DRF's throttles (on the django-redis cache) and from the
adopted policies under PolicyThrottle, and the anon policy never counts a signed-in user."""

from __future__ import annotations

import pytest

from ratelimits.models import Policy
from tests.adopt.conftest import CLASSIC_POLICY_URLS, switch_to_policies
from tests.adopt.test_replay import replay
from tests.helpers import run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("classic_site")]

ITEMS, ORDERS, PROFILE = "/api/shared/items/", "/api/shared/orders/", "/api/profile/"

#: (who, path), in order. anon is 2/min, shared by items and orders; user is 4/min, shared
#: by items, orders and profile, for alice by id and for the anonymous client by address.
#: The anonymous client is denied by anon after 2; alice passes it, and is denied by user
#: after 4. (DRF's user throttle also records the requests its anon throttle denies, which
#: a policy denied by another does not: no anonymous request comes after that to tell.)
SEQUENCE = [
    ("anonymous", PROFILE),
    *[("anonymous", ITEMS), ("anonymous", ORDERS)] * 3,
    *[("alice", ITEMS), ("alice", ORDERS), ("alice", PROFILE)] * 2,
    ("anonymous", "/open/"),
]
EXPECTED = [200, 200, 200, *[429] * 4, *[200] * 4, 429, 429, 200]


def test_the_anon_and_user_throttles_adopted_admit_what_drf_admitted(
    clients, monkeypatch, redis_client, alice
):
    before = replay(clients, SEQUENCE)
    assert before == EXPECTED
    assert redis_client.keys("*throttle_anon_*") and redis_client.keys("*throttle_user_*")

    out = run("adopt", "--mode", "enforce")
    assert "skipped" not in out
    redis_client.flushall()
    with switch_to_policies(monkeypatch, CLASSIC_POLICY_URLS):
        after = replay(clients, SEQUENCE)

    assert after == before
    assert {p.name: (p.endpoint, p.key, p.limit, p.window) for p in Policy.objects.all()} == {
        "drf-anon": ("/api/shared/*", "anon", 2, 60),
        "drf-user": ("/api/*", "user_or_ip", 4, 60),
    }
    anon_keys = {key.decode() for key in redis_client.keys("rl:*:drf-anon:*")}
    assert anon_keys and all(key.startswith("rl:{ip:127.0.0.1}:") for key in anon_keys)
    assert redis_client.keys(f"rl:{{u:{alice.pk}}}:drf-user:*")
