"""``RATELIMITS["MODE"] = "shadow"``: every policy is decided and counted as a shadow one
(the decide code's enforce slot "0"), so a request past its limit goes through and counts
as a would-be denial (``shadow_denied``: the dashboard's counts and Prometheus); its keys
are written as usual, and back in ``"enforce"`` the same counts deny. A policy table
loaded before the switch is not kept."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings
from prometheus_client import REGISTRY

from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.reporting import stats
from ratelimits.testutils import limits_shadow
from ratelimits.tools import stats_reading
from tests.helpers import create_policy, ratelimits_settings

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.urls")]

LIMIT = 2
#: Requests made in shadow mode after the one made before it: LIMIT - 1 admitted by the
#: policy, the rest would-be denials.
SHADOWED = 4


@pytest.fixture(params=["wsgi", "asgi"])
def get(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """A GET through the sync test client, or the async one (the async middleware chain)."""
    if request.param == "wsgi":
        return request.getfixturevalue("client").get  # type: ignore[no-any-return]
    return async_to_sync(request.getfixturevalue("async_client").get)


def prometheus(policy: str, outcome: str) -> float:
    labels = {"policy": policy, "outcome": outcome}
    return REGISTRY.get_sample_value("ratelimits_decisions_total", labels) or 0.0


def dashboard_counts(policy: str) -> dict[str, int]:
    """The counts the admin's dashboard shows for ``policy`` (sent to Redis first)."""
    assert stats.flush()
    series = stats_reading.series([policy], minutes=2)
    return {what: series.total(policy, what) for what in ("allowed", "denied", "shadow_denied")}


def shadowed_then_enforced(get: Callable[..., Any], url: str, policy: str, redis_client: Any):
    """One request in enforce (the table is loaded), :data:`SHADOWED` in shadow, one in
    enforce again; what each answered, the decisions counted, and the keys written."""
    before = prometheus(policy, "shadow_denied")
    first = get(url).status_code
    with limits_shadow():
        shadowed = [get(url).status_code for _ in range(SHADOWED)]
    counts = dashboard_counts(policy)
    would_be = prometheus(policy, "shadow_denied") - before
    keys = [k.decode() for k in redis_client.keys(f"rl:*{policy}*")]
    after = get(url).status_code
    return first, shadowed, counts, would_be, keys, after


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("sync", "/sync/"),
        ("async", "/async/"),
        ("decorated", "/decorated/sync/"),
        ("decorated", "/decorated/async/"),
        ("api:items", "/api/items/"),
    ],
    ids=["middleware-sync-view", "middleware-async-view", "decorator", "async-decorator", "drf"],
)
def test_shadow_admits_past_the_limit_and_counts_would_be_denials(get, redis_client, endpoint, url):
    create_policy("p", endpoint, limit=LIMIT)
    first, shadowed, counts, would_be, keys, after = shadowed_then_enforced(
        get, url, "p", redis_client
    )
    assert first == 200
    assert shadowed == [200] * SHADOWED
    would_deny = SHADOWED - (LIMIT - 1)
    assert counts == {"allowed": LIMIT, "denied": 0, "shadow_denied": would_deny}
    assert would_be == would_deny
    assert keys  # recorded as ever
    assert after == 429  # enforced again, on the counts shadow mode kept


@pytest.mark.urls("tests.contrib.ninja.urls")
@pytest.mark.parametrize("url", ["/ninja-test/plain", "/ninja-test/async"])
def test_shadow_admits_ninja_operations_past_the_limit(get, redis_client, url):
    create_policy("p", "*", limit=LIMIT)
    first, shadowed, counts, _, keys, after = shadowed_then_enforced(get, url, "p", redis_client)
    assert (first, shadowed, after) == (200, [200] * SHADOWED, 429)
    assert counts["shadow_denied"] == SHADOWED - (LIMIT - 1)
    assert keys


@pytest.mark.urls("tests.security.auth_urls")
def test_shadow_lets_sign_ins_past_the_limit_and_counts_them(client, mallory):
    create_policy("sign-in", "*", limit=1, key="username", counts="sign_in_failures")
    wrong = {"username": "mallory", "password": "wrong"}
    with limits_shadow():
        assert [client.post("/accounts/login/", wrong).status_code for _ in range(3)] == [200] * 3
        right = {"username": "mallory", "password": "right-password"}
        assert client.post("/accounts/login/", right).status_code == 302
    assert dashboard_counts("sign-in")["shadow_denied"] == 3
    client.logout()
    assert client.post("/accounts/login/", wrong).status_code == 429


def test_shadow_compiles_every_policy_with_the_enforce_slot_off():
    fields = {"name": "p", "endpoint": "*", "algorithm": "sliding_log", "limit": 1, "window": 9}
    enforced = CompiledPolicy.build(**fields, shards=2)
    assert enforced.enforce and {args[3] for args in enforced.script_args} == {"1"}
    with override_settings(RATELIMITS=ratelimits_settings(MODE="shadow")):
        shadowed = CompiledPolicy.build(**fields, shards=2)
    assert not shadowed.enforce
    assert {args[3] for args in shadowed.script_args} == {"0"}
