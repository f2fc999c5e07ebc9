"""The sign-in audit trail and lockout events, as django-axes users expect them: a record
per attempt (username as typed, address, user agent, path, result) written off the request
path, log lines for failures (INFO) and lockouts (WARNING), ``lockout_started`` sent once
per lock with the plain username and address, and the operator's reset across policies
sending ``lockout_lifted``. Against the real Redis, on the test database (SQLite, or
PostgreSQL with ``RATELIMITS_TEST_DATABASE=postgresql``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import aauthenticate
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext

from ratelimits.database import sign_in_records
from ratelimits.engine.keys.identity import username_identity
from ratelimits.models import SignInAttempt
from ratelimits.signals import lockout_lifted, lockout_started
from tests.helpers import run, username_sign_in_policy
from tests.helpers.redis_setup import ratelimits_settings

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.auth_urls")]

BACKENDS = ["ratelimits.backends.RateLimitBackend", "django.contrib.auth.backends.ModelBackend"]
ADDRESS = "198.51.100.23"
AGENT = "Mozilla/5.0 (audit test)"


@pytest.fixture(autouse=True)
def _audit_on(settings: Any) -> Iterator[None]:
    """The backend first and the audit on; the writer thread never wakes by itself (an
    hour), so each test flushes where it means to."""
    settings.AUTHENTICATION_BACKENDS = BACKENDS
    settings.RATELIMITS = ratelimits_settings(SIGN_IN_AUDIT=True, SIGN_IN_AUDIT_FLUSH_INTERVAL=3600)
    sign_in_records.reset()
    yield
    sign_in_records.reset()


@pytest.fixture
def victim() -> User:
    return User.objects.create_user("victim", password="right-password")


@pytest.fixture
def started() -> Iterator[list[dict[str, Any]]]:
    """Each ``lockout_started`` sent, as its keyword arguments."""
    sent: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        sent.append(kwargs)

    lockout_started.connect(receiver, weak=False)
    yield sent
    lockout_started.disconnect(receiver)


def sign_in(username: str, password: str, ip: str = ADDRESS) -> int:
    data = {"username": username, "password": password}
    response = Client().post("/accounts/login/", data, REMOTE_ADDR=ip, HTTP_USER_AGENT=AGENT)
    return response.status_code


def audit_writes(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if "signinattempt" in q["sql"].lower()]


def per_username(limit: int = 5, **fields: Any) -> Any:
    return username_sign_in_policy(limit, **fields)


def test_three_failures_and_a_success_recorded_off_the_request_path_and_logged(victim, caplog):
    per_username(limit=5)
    caplog.set_level(logging.INFO, logger="ratelimits")
    statuses = []
    for typed, password in [("Victim", "guess"), ("victim", "guess2"), ("VICTIM", "x")]:
        with CaptureQueriesContext(connection) as queries:
            statuses.append(sign_in(typed, password))
        assert audit_writes(queries) == []  # nothing written while the request waited
    with CaptureQueriesContext(connection) as queries:
        statuses.append(sign_in("victim", "right-password"))
    assert audit_writes(queries) == []
    assert statuses == [200, 200, 200, 302]
    assert SignInAttempt.objects.count() == 0
    assert len(sign_in_records.pending()) == 4

    with CaptureQueriesContext(connection) as queries:
        assert sign_in_records.flush() == 4
    inserts = audit_writes(queries)
    assert len(inserts) == 1 and inserts[0].lstrip().upper().startswith("INSERT")
    assert sign_in_records.pending() == []
    rows = list(SignInAttempt.objects.order_by("when", "pk"))
    assert [(r.username, r.result) for r in rows] == [
        ("Victim", "failed"),
        ("victim", "failed"),
        ("VICTIM", "failed"),
        ("victim", "succeeded"),
    ]
    assert {(r.address, r.user_agent, r.path, r.policy) for r in rows} == {
        (ADDRESS, AGENT, "/accounts/login/", "")
    }
    assert all(abs((datetime.now(UTC) - r.when).total_seconds()) < 60 for r in rows)

    lines = [r.getMessage() for r in caplog.records if r.name == "ratelimits"]
    failures = [line for line in lines if "sign-in failed" in line]
    assert failures == [
        f"ratelimits: sign-in failed: username {name!r} from {ADDRESS} at /accounts/login/"
        for name in ("Victim", "victim", "VICTIM")
    ]
    assert all(r.levelno == logging.INFO for r in caplog.records if "sign-in failed" in r.msg)


def test_a_refusal_is_recorded_with_the_policy_that_refused_it(victim, caplog):
    per_username(limit=2)
    caplog.set_level(logging.INFO, logger="ratelimits")
    statuses = [sign_in("victim", "guess") for _ in range(2)]
    statuses.append(sign_in("victim", "right-password"))
    assert statuses[-1] == 429
    sign_in_records.flush()
    results = list(SignInAttempt.objects.order_by("when", "pk").values_list("result", "policy"))
    assert results == [("failed", ""), ("failed", ""), ("refused", "sign-in-username")]
    assert any(
        "sign-in refused by policy sign-in-username: username 'victim'" in r.getMessage()
        for r in caplog.records
    )


def test_lockout_started_once_per_lock_with_the_plain_username_and_address(victim, started, caplog):
    per_username(limit=2, lockout=900)
    caplog.set_level(logging.INFO, logger="ratelimits")
    for _ in range(6):  # two failures, then every attempt refused during the lock
        sign_in("Victim", "guess")
    assert sign_in("victim", "right-password") == 429
    assert len(started) == 1
    (sent,) = started
    assert sent["username"] == "Victim"  # as typed (its case), never the hash
    assert sent["address"] == ADDRESS
    assert sent["policy"] == "sign-in-username"
    assert sent["identity"] == username_identity("victim")
    left = (sent["until"] - datetime.now(UTC)).total_seconds()
    assert 890 < left <= 900
    warnings = [r for r in caplog.records if "lockout started" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert "'Victim'" in warnings[0].getMessage() and ADDRESS in warnings[0].getMessage()

    # The operator lifts it (every policy); a new lock is a new event.
    lifted: list[dict[str, Any]] = []

    def on_lifted(sender: Any, **kwargs: Any) -> None:
        lifted.append(kwargs)

    lockout_lifted.connect(on_lifted, weak=False)
    try:
        run("reset", "--identity", "username:victim", "--yes")
    finally:
        lockout_lifted.disconnect(on_lifted)
    assert [(x["policy"], x["identity"], x["lifted"]) for x in lifted] == [
        ("sign-in-username", username_identity("victim"), "username:victim")
    ]
    time.sleep(0.05)
    assert sign_in("victim", "right-password") == 302
    for _ in range(4):
        sign_in("victim", "guess")
    assert len(started) == 2


def test_async_receivers_of_lockout_started_are_awaited(victim):
    per_username(limit=1, lockout=300)
    sent: list[dict[str, Any]] = []

    async def receiver(sender: Any, **kwargs: Any) -> None:
        sent.append(kwargs)

    lockout_started.connect(receiver, weak=False)
    try:

        async def attempt() -> Any:
            request = RequestFactory().post("/accounts/login/", REMOTE_ADDR="203.0.113.44")
            return await aauthenticate(request, username="Victim", password="guess")

        for _ in range(4):
            assert async_to_sync(attempt)() is None
    finally:
        lockout_started.disconnect(receiver)
    assert [(s["username"], s["address"]) for s in sent] == [("Victim", "203.0.113.44")]


def test_usernames_can_be_kept_out_of_the_log(victim, settings, caplog):
    settings.RATELIMITS = ratelimits_settings(
        SIGN_IN_AUDIT=True, SIGN_IN_AUDIT_FLUSH_INTERVAL=3600, SIGN_IN_LOG_USERNAMES=False
    )
    per_username(limit=1, lockout=300)
    caplog.set_level(logging.INFO, logger="ratelimits")
    for _ in range(3):
        sign_in("victim", "guess")
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "ratelimits")
    assert "sign-in failed" in text and "lockout started" in text
    assert "victim" not in text
    assert username_identity("victim") in text
    sign_in_records.flush()  # the audit trail itself keeps the username
    assert set(SignInAttempt.objects.values_list("username", flat=True)) == {"victim"}


def test_nothing_is_kept_with_the_audit_off(victim, settings):
    settings.RATELIMITS = ratelimits_settings(SIGN_IN_AUDIT=False)
    per_username(limit=5)
    sign_in("victim", "guess")
    sign_in("victim", "right-password")
    assert sign_in_records.pending() == []


def test_the_buffer_is_bounded(monkeypatch, caplog):
    monkeypatch.setattr(sign_in_records, "MAX_PENDING", 3)
    when = datetime.now(UTC)
    for n in range(5):
        sign_in_records.record(sign_in_records.Entry(when, f"u{n}", ADDRESS, "", "/", "failed"))
    assert [e.username for e in sign_in_records.pending()] == ["u2", "u3", "u4"]
    assert sign_in_records.flush() == 3
    assert any("2 sign-in audit records dropped" in r.getMessage() for r in caplog.records)


@pytest.mark.django_db(transaction=True)
def test_the_writer_thread_writes_them(victim, settings):
    settings.RATELIMITS = ratelimits_settings(SIGN_IN_AUDIT=True, SIGN_IN_AUDIT_FLUSH_INTERVAL=0.1)
    per_username(limit=5)
    assert sign_in("victim", "guess") == 200
    deadline = time.monotonic() + 10
    while SignInAttempt.objects.count() < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(SignInAttempt.objects.values_list("username", "result")) == [("victim", "failed")]
