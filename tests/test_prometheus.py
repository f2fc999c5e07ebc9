"""Prometheus metrics and the request_throttled and request_near_limit signals, through the
API against the real Redis.

prometheus-client's default registry is process-global, so every count is the difference
between readings taken before and after the requests of a test.
"""

from __future__ import annotations

import importlib
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client, override_settings
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.request import Request

from ratelimits import prometheus
from ratelimits.engine import limiter
from ratelimits.engine.decision import Decision, Verdict, outcomes
from ratelimits.engine.keys.identity import ip_identity
from ratelimits.signals import request_near_limit, request_throttled
from ratelimits.testutils import free_port
from ratelimits.throttling import PolicyThrottle
from ratelimits.tools import endpoints
from tests.helpers import create_policy
from tests.helpers import policy as compiled_policy

pytestmark = pytest.mark.django_db


def record(verdict: Verdict, seconds: float, source: str) -> None:
    """Count ``verdict`` as the limiter's observer would."""
    prometheus.observe(outcomes(verdict), seconds, source)


ADDRESS = "198.51.100.9"
WHO = ip_identity(ADDRESS)


def get_items(client: Client, n: int) -> list[int]:
    return [client.get("/api/items/", REMOTE_ADDR=ADDRESS).status_code for _ in range(n)]


def post_login(client: Client, n: int) -> list[int]:
    return [client.post("/api/login/", REMOTE_ADDR=ADDRESS).status_code for _ in range(n)]


def readings() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the two metrics: ``{(sample name, sorted labels): value}``."""
    found = {}
    for family in REGISTRY.collect():
        if family.name in ("ratelimits_decisions", "ratelimits_decision_seconds"):
            for sample in family.samples:
                if not sample.name.endswith("_created"):
                    found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


class Delta:
    """What changed in the metrics while the ``measured()`` block ran."""

    def __init__(self) -> None:
        self.changed: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}

    @property
    def decisions(self) -> dict[tuple[str, str], float]:
        """``{(policy, outcome): n}`` counted."""
        return {
            (dict(labels)["policy"], dict(labels)["outcome"]): n
            for (name, labels), n in self.changed.items()
            if name == "ratelimits_decisions_total"
        }

    @property
    def timed(self) -> dict[str, float]:
        """``{source: n}`` requests observed by the histogram."""
        return {
            dict(labels)["source"]: n
            for (name, labels), n in self.changed.items()
            if name == "ratelimits_decision_seconds_count"
        }

    def seconds(self, source: str, *, le: str | None = None) -> float:
        """The histogram's ``_sum`` growth, or with ``le`` that bucket's."""
        if le is None:
            return self.changed.get(("ratelimits_decision_seconds_sum", (("source", source),)), 0)
        labels = (("le", le), ("source", source))
        return self.changed.get(("ratelimits_decision_seconds_bucket", labels), 0)


@contextmanager
def measured() -> Iterator[Delta]:
    delta = Delta()
    before = readings()
    yield delta
    for key, value in readings().items():
        if value != before.get(key, 0):
            delta.changed[key] = value - before.get(key, 0)


@contextmanager
def redis_unreachable() -> Iterator[None]:
    """The limiter's Redis is a closed port (connections refused)."""
    location = f"redis://127.0.0.1:{free_port()}/0"
    with override_settings(
        CACHES={"default": {**settings.CACHES["default"], "LOCATION": location}}
    ):
        yield


@pytest.fixture
def throttled() -> Iterator[list[dict[str, Any]]]:
    """The keyword arguments (and sender) of every request_throttled sent during the test."""
    sent: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        sent.append({"sender": sender, **kwargs})

    request_throttled.connect(receiver, dispatch_uid="test_prometheus")
    yield sent
    request_throttled.disconnect(dispatch_uid="test_prometheus")


# Counting ------------------------------------------------------------------------------


def test_allowed_then_denied_with_floods_answered_locally(client):
    create_policy("prom-items", "api:items", limit=3)
    with measured() as delta:
        assert get_items(client, 5) == [200, 200, 200, 429, 429]
    assert delta.decisions == {("prom-items", "allowed"): 3, ("prom-items", "denied"): 2}
    # The 3rd admission used the last slot: Redis said the key is blocked, so the worker
    # answered the next two itself.
    assert delta.timed == {"redis": 3, "local": 2}
    assert delta.seconds("redis", le="0.25") == 3
    assert delta.seconds("local", le="0.25") == 2
    assert 0 < delta.seconds("local") < delta.seconds("redis") < 1


def test_without_local_denials_every_request_is_a_round_trip(client, settings):
    settings.RATELIMITS = {**settings.RATELIMITS, "LOCAL_DENIALS": 0}
    create_policy("prom-items", "api:items", limit=3)
    with measured() as delta:
        assert get_items(client, 5) == [200, 200, 200, 429, 429]
    assert delta.decisions == {("prom-items", "allowed"): 3, ("prom-items", "denied"): 2}
    assert delta.timed == {"redis": 5}


def test_shadow_denials(client):
    create_policy("prom-shadow", "api:items", limit=2, mode="shadow")
    with measured() as delta:
        assert get_items(client, 5) == [200] * 5
    assert delta.decisions == {("prom-shadow", "allowed"): 2, ("prom-shadow", "shadow_denied"): 3}
    assert delta.timed == {"redis": 5}


def test_each_policy_counts_once_per_request_the_histogram_once(client, settings):
    settings.RATELIMITS = {**settings.RATELIMITS, "LOCAL_DENIALS": 0}
    create_policy("prom-wide", "api:items", limit=5)
    create_policy("prom-tight", "/api/items/", limit=1)
    with measured() as delta:
        assert get_items(client, 3) == [200, 429, 429]
    assert delta.decisions == {
        ("prom-wide", "allowed"): 1,
        ("prom-wide", "not_counted"): 2,
        ("prom-tight", "allowed"): 1,
        ("prom-tight", "denied"): 2,
    }
    assert delta.timed == {"redis": 3}


def test_fail_open_and_fail_closed_with_redis_unreachable(client):
    create_policy("prom-open", "api:items", limit=1, fail_open=True)
    create_policy("prom-closed", "api:login", limit=1, fail_open=False)
    with redis_unreachable(), measured() as delta:
        assert get_items(client, 4) == [200] * 4
        assert post_login(client, 3) == [429] * 3
    assert delta.decisions == {("prom-open", "failed_open"): 4, ("prom-closed", "failed_closed"): 3}
    # Refused connections, then the open breaker: all answered by the fail mode.
    assert delta.timed == {"fallback": 7}


def test_peeks_and_empty_requests_are_not_counted(redis_client):
    p = compiled_policy("sliding_log", 3, 60, name="prom-peek")
    checks = [limiter.Check(p, WHO)]
    with measured() as delta:
        limiter.decide([])
        assert limiter.decide(checks, record=False).allowed
        with redis_unreachable():
            assert limiter.decide(checks, record=False).decisions[0].failed
    assert delta.changed == {}
    with measured() as delta:
        limiter.decide(checks)
    assert delta.decisions == {("prom-peek", "allowed"): 1}


def failed(name: str, *, fail_open: bool) -> Decision:
    return Decision(
        policy=name,
        identity=WHO,
        allowed=fail_open,
        enforce=True,
        limit=1,
        window=60,
        count=0.0,
        remaining=0,
        retry_after=0.0 if fail_open else 1.0,
        reset=0.0,
        failed=True,
    )


def test_record_counts_each_decision_and_observes_the_seconds_once():
    verdict = Verdict((failed("prom-o", fail_open=True), failed("prom-c", fail_open=False)))
    with measured() as delta:
        record(verdict, 0.003, "fallback")
        record(verdict, 0.003, "fallback")
    assert delta.decisions == {("prom-o", "failed_open"): 2, ("prom-c", "failed_closed"): 2}
    assert delta.timed == {"fallback": 2}
    assert delta.seconds("fallback") == pytest.approx(0.006)
    assert delta.seconds("fallback", le="0.0025") == 0
    assert delta.seconds("fallback", le="0.005") == 2


def test_reloading_the_module_keeps_the_registered_metrics():
    decisions, seconds = prometheus.DECISIONS, prometheus.DECISION_SECONDS
    reloaded = importlib.reload(prometheus)  # registering again would raise
    assert reloaded.DECISIONS is decisions
    assert reloaded.DECISION_SECONDS is seconds
    assert REGISTRY._names_to_collectors["ratelimits_decisions_total"] is decisions


# The view ------------------------------------------------------------------------------


def exposed(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_view_serves_the_text_exposition(client):
    create_policy("prom-view", "api:items", limit=1)
    denied = ("ratelimits_decisions_total", (("outcome", "denied"), ("policy", "prom-view")))
    before = exposed(client.get("/ratelimits/metrics/").content.decode()).get(denied, 0)
    assert get_items(client, 3) == [200, 429, 429]
    response = client.get("/ratelimits/metrics/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert 'ratelimits_decisions_total{outcome="denied",policy="prom-view"}' in text
    assert "# TYPE ratelimits_decision_seconds histogram" in text
    assert exposed(text)[denied] == before + 2
    assert client.head("/ratelimits/metrics/").status_code == 200


@pytest.mark.parametrize("method", ["post", "put", "delete", "patch"])
def test_the_view_answers_only_get_and_head(method):
    client = Client(enforce_csrf_checks=True)
    response = getattr(client, method)("/ratelimits/metrics/")
    assert response.status_code == 405
    assert sorted(response["Allow"].split(", ")) == ["GET", "HEAD"]


def test_the_metrics_url_is_not_suggested_as_an_endpoint():
    values = {s.value for s in endpoints.suggestions()}
    assert "api:items" in values
    assert not any(value.startswith("ratelimits:") for value in values)


RECORD_IN_A_WORKER = """
from ratelimits import prometheus
from ratelimits.engine.decision import Decision, Verdict, outcomes
denied = Decision(policy="prom-mp", identity="ip:x", allowed=False, enforce=True, limit=1,
                  window=60, count=1.0, remaining=0, retry_after=1.0, reset=1.0)
prometheus.observe(outcomes(Verdict((denied,))), 0.0004, "redis")
"""


@pytest.mark.slow
def test_under_prometheus_multiproc_dir_the_view_merges_every_worker(tmp_path, monkeypatch):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(2):  # two worker processes
        subprocess.run([sys.executable, "-c", RECORD_IN_A_WORKER], env=env, check=True)
    assert len(list(Path(tmp_path).glob("*.db"))) >= 2
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    response = Client().get("/ratelimits/metrics/")
    assert response.status_code == 200
    found = exposed(response.content.decode())
    assert (
        found[("ratelimits_decisions_total", (("outcome", "denied"), ("policy", "prom-mp")))] == 2
    )
    assert found[("ratelimits_decision_seconds_count", (("source", "redis"),))] == 2
    # Only the directory is served: this process's own counts are not in it.
    policies = {dict(labels).get("policy") for _, labels in found} - {None}
    assert policies == {"prom-mp"}


# The signal ----------------------------------------------------------------------------


def test_the_signal_is_sent_once_per_denied_request(client, throttled):
    create_policy("prom-signal", "api:items", limit=2)
    assert get_items(client, 5) == [200, 200, 429, 429, 429]
    assert len(throttled) == 3
    for sent in throttled:
        assert sent["sender"] is PolicyThrottle
        assert isinstance(sent["request"], Request)
        assert sent["request"].META["REMOTE_ADDR"] == ADDRESS
        assert sent["policy"] == "prom-signal"
        assert sent["identity"] == WHO
        assert [(d.policy, d.identity, d.allowed) for d in sent["decisions"]] == [
            ("prom-signal", WHO, False)
        ]
    assert client.get("/api/items/", REMOTE_ADDR="198.51.100.10").status_code == 200
    assert len(throttled) == 3  # another client, admitted: nothing sent


def test_the_signal_names_the_denying_policy_only(client, settings, throttled):
    settings.RATELIMITS = {**settings.RATELIMITS, "LOCAL_DENIALS": 0}
    create_policy("prom-wide", "api:items", limit=5)
    create_policy("prom-tight", "/api/items/", limit=1)
    assert get_items(client, 2) == [200, 429]
    (sent,) = throttled
    assert sent["policy"] == "prom-tight"
    assert [d.policy for d in sent["decisions"]] == ["prom-tight"]


def test_the_signal_is_not_sent_for_shadow_denials(client, throttled):
    create_policy("prom-shadow", "api:items", limit=1, mode="shadow")
    assert get_items(client, 3) == [200] * 3
    assert throttled == []


def test_the_signal_is_sent_for_fail_closed_denials_only(client, throttled):
    create_policy("prom-open", "api:items", limit=1, fail_open=True)
    create_policy("prom-closed", "api:login", limit=1, fail_open=False)
    with redis_unreachable():
        assert get_items(client, 3) == [200] * 3
        assert post_login(client, 2) == [429, 429]
    assert [(s["policy"], s["identity"]) for s in throttled] == [("prom-closed", WHO)] * 2
    assert all(s["decisions"][0].failed for s in throttled)


def test_a_failing_receiver_is_logged_and_the_request_is_still_a_429(client, caplog):
    def broken(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("receiver broke")

    create_policy("prom-signal", "api:items", limit=1)
    request_throttled.connect(broken, dispatch_uid="test_prometheus_broken")
    try:
        with caplog.at_level(logging.ERROR, logger="ratelimits"):
            assert get_items(client, 2) == [200, 429]
    finally:
        request_throttled.disconnect(dispatch_uid="test_prometheus_broken")
    assert any("request_throttled receiver" in m and "receiver broke" in m for m in caplog.messages)


# Near the limit ------------------------------------------------------------------------


@pytest.fixture
def neared() -> Iterator[list[dict[str, Any]]]:
    """The keyword arguments (and sender) of every request_near_limit sent during the test."""
    sent: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        sent.append({"sender": sender, **kwargs})

    request_near_limit.connect(receiver, dispatch_uid="test_prometheus_near")
    yield sent
    request_near_limit.disconnect(dispatch_uid="test_prometheus_near")


def test_the_near_limit_counter_in_the_exposition(client, settings):
    settings.RATELIMITS = {**settings.RATELIMITS, "NEAR_LIMIT": 0.8}
    create_policy("prom-near", "api:items", limit=10)
    near = ("ratelimits_near_limit_total", (("policy", "prom-near"),))
    before = exposed(client.get("/ratelimits/metrics/").content.decode()).get(near, 0)
    assert get_items(client, 7) == [200] * 7
    text = client.get("/ratelimits/metrics/").content.decode()
    assert exposed(text).get(near, 0) == before  # 7 of 10: not yet
    assert get_items(client, 4) == [200] * 3 + [429]  # the 8th crosses; 9, 10, 11 do not
    text = client.get("/ratelimits/metrics/").content.decode()
    assert "# TYPE ratelimits_near_limit_total counter" in text
    assert 'ratelimits_near_limit_total{policy="prom-near"}' in text
    assert exposed(text)[near] == before + 1
    decisions = exposed(text)
    allowed = ("ratelimits_decisions_total", (("outcome", "allowed"), ("policy", "prom-near")))
    assert decisions[allowed] >= 10  # near the limit is counted besides, not instead


def test_record_counts_a_near_limit_decision_in_its_own_counter():
    admitted = Decision(
        policy="prom-rec",
        identity=WHO,
        allowed=True,
        enforce=True,
        limit=10,
        window=60,
        count=7.0,
        remaining=2,
        retry_after=0.0,
        reset=1.0,
    )
    verdict = Verdict((admitted,))
    verdict.near_limit = (admitted,)
    labels = {"policy": "prom-rec"}
    before = REGISTRY.get_sample_value("ratelimits_near_limit_total", labels) or 0
    with measured() as delta:
        record(verdict, 0.0004, "redis")
    assert delta.decisions == {("prom-rec", "allowed"): 1}  # no "near_limit" outcome
    assert REGISTRY.get_sample_value("ratelimits_near_limit_total", labels) == before + 1


def test_the_drf_throttle_sends_request_near_limit_once(client, settings, neared):
    settings.RATELIMITS = {**settings.RATELIMITS, "NEAR_LIMIT": 0.8}
    create_policy("prom-near", "api:items", limit=10)
    assert get_items(client, 11) == [200] * 10 + [429]
    (sent,) = neared
    assert sent["sender"] is PolicyThrottle
    assert isinstance(sent["request"], Request)
    assert sent["policy"] == "prom-near"
    assert sent["identity"] == WHO
    decision = sent["decision"]
    assert (decision.policy, decision.allowed, decision.limit, decision.remaining) == (
        "prom-near",
        True,
        10,
        2,
    )


def test_a_failing_near_limit_receiver_is_logged_and_the_request_goes_on(client, caplog):
    def broken(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("receiver broke")

    create_policy("prom-near", "api:items", limit=1)  # its only request crosses 0.8
    request_near_limit.connect(broken, dispatch_uid="test_prometheus_near_broken")
    try:
        with caplog.at_level(logging.ERROR, logger="ratelimits"):
            assert get_items(client, 2) == [200, 429]
    finally:
        request_near_limit.disconnect(dispatch_uid="test_prometheus_near_broken")
    assert any(
        "request_near_limit receiver" in m and "receiver broke" in m for m in caplog.messages
    )
