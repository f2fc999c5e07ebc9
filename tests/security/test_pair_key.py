"""Red team: a stranger who knows a username locks its owner out (django-axes' answer is
``AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]``). A ``username+ip`` policy
counts each username from each address apart. And a sign-in is one ask through the faces'
pipeline: its signals are the faces' own. Against the real Redis."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_login_failed
from django.test import Client

from ratelimits.backends import RateLimitBackend
from ratelimits.signals import request_near_limit, request_throttled
from tests.helpers import create_policy

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.auth_urls")]

IP1, IP2 = "203.0.113.1", "198.51.100.7"


@pytest.fixture(autouse=True)
def _backend_first(settings: Any) -> None:
    settings.AUTHENTICATION_BACKENDS = [
        "ratelimits.backends.RateLimitBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]


@pytest.fixture
def users() -> None:
    User.objects.create_user("alice", password="alice-password")
    User.objects.create_user("bob", password="bob-password")


def sign_in(username: str, password: str, ip: str, client: Client | None = None) -> int:
    data = {"username": username, "password": password}
    return (client or Client()).post("/accounts/login/", data, REMOTE_ADDR=ip).status_code


def pair_policy(limit: int = 3) -> None:
    create_policy(
        "signin-pair",
        "*",
        limit=limit,
        window=900,
        key="username+ip",
        counts="sign_in_failures",
        lockout=900,
        fail_open=False,
    )


@pytest.mark.usefixtures("users")
def test_a_stranger_locks_a_username_out_from_their_address_only(redis_client):
    pair_policy(limit=3)
    # The third failure starts the pair's lockout, and is answered as locked.
    assert [sign_in("alice", "guess", IP1) for _ in range(3)] == [200, 200, 429]
    assert sign_in("alice", "alice-password", IP1) == 429  # this pair is locked out
    assert sign_in("alice", "alice-password", IP2) == 302  # the owner, elsewhere: in
    assert sign_in("bob", "bob-password", IP1) == 302  # another user from IP1: in
    # The key names the pair: the username hashed, the address readable.
    (key,) = [k.decode() for k in redis_client.keys("*signin-pair*") if k.endswith(b":log")]
    assert "alice" not in key and f"+ip:{IP1}}}" in key and "{n:" in key


@pytest.mark.usefixtures("users")
def test_a_plain_username_policy_lets_the_stranger_lock_the_owner_out_everywhere():
    """What the pair key is for: the same attack against a ``username`` policy."""
    create_policy(
        "signin-username", "*", limit=3, window=900, key="username", counts="sign_in_failures"
    )
    assert [sign_in("alice", "guess", IP1) for _ in range(3)] == [200] * 3
    assert sign_in("alice", "alice-password", IP2) == 429


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("users", "patient_redis")
def test_parallel_guesses_at_one_pair_check_exactly_the_limit():
    """12 threads guess alice's password from one address at once, limit 3: exactly 3
    passwords are checked; the others are refused before any check."""
    pair_policy(limit=3)
    checked: list[str] = []

    def count_check(sender: Any, credentials: Any = None, **kwargs: Any) -> None:
        checked.append(credentials["username"])

    results: list[int] = []
    start = threading.Barrier(12)

    def guess(index: int) -> None:
        client = Client()
        start.wait()
        results.append(sign_in("alice", f"guess-{index}", IP1, client))

    user_login_failed.connect(count_check)
    try:
        threads = [threading.Thread(target=guess, args=(i,)) for i in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        user_login_failed.disconnect(count_check)
    # The third failure is answered as locked (it starts the lockout): 2 plain failures.
    assert sorted(results) == [200] * 2 + [429] * 10
    # Every attempt failed, refused or not; the refused ones before their password check.
    assert len(checked) == 12
    assert sign_in("alice", "alice-password", IP2) == 302


@pytest.mark.usefixtures("users")
def test_a_sign_in_sends_near_limit_and_throttled_as_every_face_does(settings):
    """A sign-in is one more ask through the pipeline: request_near_limit when a failure
    takes the pair near its limit, request_throttled when an attempt is refused, both
    from RateLimitBackend."""
    settings.RATELIMITS = {**settings.RATELIMITS, "NEAR_LIMIT": 0.6}
    pair_policy(limit=5)
    heard: list[tuple[str, Any, str]] = []

    def near(sender: Any, policy: str = "", **kwargs: Any) -> None:
        heard.append(("near", sender, policy))

    def throttled(sender: Any, **kwargs: Any) -> None:
        heard.append(("throttled", sender, kwargs["decisions"][0].policy))

    request_near_limit.connect(near)
    request_throttled.connect(throttled)
    try:
        statuses = [sign_in("alice", "guess", IP1) for _ in range(6)]
    finally:
        request_near_limit.disconnect(near)
        request_throttled.disconnect(throttled)
    assert statuses == [200] * 4 + [429] * 2  # the fifth failure starts the lockout
    assert ("near", RateLimitBackend, "signin-pair") in heard
    assert heard[-1] == ("throttled", RateLimitBackend, "signin-pair")
