"""PolicyThrottle through the Django test client: matching, responses, headers, shadow."""

from __future__ import annotations

import logging

import pytest
from django.test import override_settings
from django.urls import path
from prometheus_client import REGISTRY
from rest_framework.response import Response
from rest_framework.views import APIView

from ratelimits.throttling import PolicyThrottle
from tests.helpers import DECIDE_COMMANDS, create_policy, decide_command, statuses

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("backend")]


def counter(policy: str, outcome: str) -> float:
    """The process's Prometheus count of ``outcome`` under ``policy``."""
    labels = {"policy": policy, "outcome": outcome}
    return REGISTRY.get_sample_value("ratelimits_decisions_total", labels) or 0.0


def test_denied_is_429_with_retry_after_rounded_up(client):
    create_policy("items", "api:items", limit=2, window=60)
    assert statuses(client, "/api/items/", 2) == [200, 200]
    response = client.get("/api/items/")
    assert response.status_code == 429
    assert 59 <= int(response["Retry-After"]) <= 60


@pytest.mark.parametrize(
    "endpoint",
    ["search", "api:search", "/api/search/", "/api/*", "*"],
    ids=["throttle_scope", "url_name", "path", "glob", "everything"],
)
def test_a_policy_matches_by_scope_url_name_or_glob(client, endpoint):
    create_policy("p", endpoint, limit=1)
    assert statuses(client, "/api/search/", 2) == [200, 429]


def test_a_view_no_policy_matches_is_not_limited(client):
    create_policy("p", "api:search", limit=1)
    responses = [client.get("/api/items/") for _ in range(5)]
    assert [r.status_code for r in responses] == [200] * 5
    assert all("RateLimit" not in r for r in responses)


def test_methods_restrict_a_policy(client):
    create_policy("login", "api:login", limit=1, methods="POST")
    assert statuses(client, "/api/login/", 2, method="post") == [400, 429]
    # GET is not under the policy (the view answers 405 for it, but never 429).
    assert statuses(client, "/api/login/", 3) == [405, 405, 405]


def test_disabled_policies_do_not_apply(client):
    create_policy("p", "api:items", limit=1, enabled=False)
    assert statuses(client, "/api/items/", 3) == [200, 200, 200]


def test_every_matching_policy_applies(client):
    create_policy("a", "api:items", limit=3, algorithm="fixed_window")
    create_policy("b", "/api/items/", limit=2, algorithm="sliding_counter")
    assert statuses(client, "/api/items/", 3) == [200, 200, 429]


def test_ratelimit_headers_on_allowed_and_denied_responses(client):
    create_policy("login", "api:login", limit=2, window=60, key="ip")
    create_policy("login-burst", "/api/login/", limit=5, window=10, algorithm="fixed_window")
    first = client.post("/api/login/")
    assert first["RateLimit-Policy"] == '"login";q=2;w=60, "login-burst";q=5;w=10'
    login, burst = first["RateLimit"].split(", ")
    assert login == '"login";r=1;t=60'
    assert burst.startswith('"login-burst";r=4;t=')
    client.post("/api/login/")
    denied = client.post("/api/login/")
    assert denied.status_code == 429
    assert denied["RateLimit"].startswith('"login";r=0;t=')


def test_headers_can_be_turned_off(client, settings):
    settings.RATELIMITS = {**settings.RATELIMITS, "HEADERS": False}
    create_policy("items", "api:items")
    response = client.get("/api/items/")
    assert "RateLimit" not in response and "RateLimit-Policy" not in response


def test_shadow_mode_logs_and_counts_but_lets_requests_pass(client, caplog):
    create_policy("items", "api:items", limit=2, mode="shadow")
    counted = {outcome: counter("items", outcome) for outcome in ("allowed", "shadow_denied")}
    with caplog.at_level(logging.INFO, logger="ratelimits"):
        assert statuses(client, "/api/items/", 5) == [200] * 5
    assert counter("items", "allowed") - counted["allowed"] == 2
    assert counter("items", "shadow_denied") - counted["shadow_denied"] == 3
    # Logged once per client and window (ratelimits.engine.reporting.shadow_log), not per request.
    assert sum("shadow policy items would deny" in m for m in caplog.messages) == 1


def test_ip_policy_ignores_a_forged_forwarded_for(client):
    create_policy("login", "api:login", limit=2, key="ip")
    forged = [
        client.post("/api/login/", REMOTE_ADDR="198.51.100.4", HTTP_X_FORWARDED_FOR=f"10.0.0.{i}")
        for i in range(3)
    ]
    assert [r.status_code for r in forged] == [400, 400, 429]
    assert client.post("/api/login/", REMOTE_ADDR="198.51.100.5").status_code == 400


def test_behind_one_proxy_the_client_is_the_last_forwarded_address(client, settings):
    settings.RATELIMITS = {**settings.RATELIMITS, "NUM_PROXIES": 1}
    create_policy("login", "api:login", limit=1, key="ip")
    proxy = "10.0.0.1"
    ok = client.post("/api/login/", REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="203.0.113.1")
    assert ok.status_code == 400
    forged = client.post(
        "/api/login/", REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="1.2.3.4, 203.0.113.1"
    )
    assert forged.status_code == 429
    assert (
        client.post(
            "/api/login/", REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="203.0.113.2"
        ).status_code
        == 400
    )


def test_user_policies_count_users_apart_and_skip_anonymous(client, django_user_model):
    create_policy("payment", "/api/payment/*", limit=1, key="user", methods="POST")
    alice = django_user_model.objects.create_user("alice", password="pw")
    bob = django_user_model.objects.create_user("bob", password="pw")
    client.force_login(alice)
    assert statuses(client, "/api/payment/", 2, method="post") == [200, 429]
    client.force_login(bob)
    assert statuses(client, "/api/payment/", 1, method="post") == [200]
    client.logout()
    assert statuses(client, "/api/payment/", 3, method="post") == [403, 403, 403]


def test_header_key_counts_by_header_value(client):
    create_policy("search", "search", limit=1, key="header:X-Api-Key")
    assert client.get("/api/search/", HTTP_X_API_KEY="k1").status_code == 200
    assert client.get("/api/search/", HTTP_X_API_KEY="k1").status_code == 429
    assert client.get("/api/search/", HTTP_X_API_KEY="k2").status_code == 200


def test_no_database_query_per_request_once_warm(client, django_assert_num_queries):
    create_policy("items", "api:items", limit=100)
    create_policy("search", "search", limit=100)
    client.get("/api/items/")
    with django_assert_num_queries(0):
        for _ in range(10):
            assert client.get("/api/items/").status_code == 200
            assert client.get("/api/search/").status_code == 200


def test_one_decide_call_per_request_whatever_the_number_of_policies(client, redis_client):
    for i in range(3):
        create_policy(
            f"p{i}",
            "api:items",
            limit=100,
            algorithm=["sliding_log", "fixed_window", "sliding_counter"][i],
        )
    client.get("/api/items/")  # warm: loads the table and the script
    redis_client.config_resetstat()
    for _ in range(10):
        client.get("/api/items/")
    stats_ = redis_client.info("commandstats")
    command = decide_command(redis_client)
    assert stats_[f"cmdstat_{command}"]["calls"] == 10
    assert [name for name in DECIDE_COMMANDS if f"cmdstat_{name}" in stats_] == [command]


class PerViewThrottled(APIView):
    throttle_classes = [PolicyThrottle]
    throttle_scope = "per-view"

    def get(self, request):
        return Response({"ok": True})


urlpatterns = [path("per-view/", PerViewThrottled.as_view(), name="per-view")]


@override_settings(ROOT_URLCONF=__name__, REST_FRAMEWORK={})
def test_per_view_throttle_classes(client):
    create_policy("per-view", "per-view", limit=1)
    assert statuses(client, "/per-view/", 2) == [200, 429]
