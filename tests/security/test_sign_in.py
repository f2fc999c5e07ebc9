"""Red team: credential stuffing against sign-in forms, and the sign-in policies that stop it.

Django's ``LoginView`` and the admin login answer a wrong password with 200 and the form
again, so ``counts = failures`` counted nothing there, and no policy could count failed
sign-ins per attempted username across addresses. A ``counts = "sign_in_failures"``
policy counts each failed ``authenticate()``, by the attempted ``username`` (hashed) or
by address, and ``RateLimitBackend``, first in ``AUTHENTICATION_BACKENDS``, refuses
every sign-in over the limit, the right password too. Against the real Redis.
"""

from __future__ import annotations

import base64
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import aauthenticate
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_login_failed
from django.core.management import call_command
from django.test import Client, RequestFactory

from ratelimits.engine.keys.identity import username_identity
from tests.helpers import create_policy, run, username_sign_in_policy

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.auth_urls")]

BACKENDS = ["ratelimits.backends.RateLimitBackend", "django.contrib.auth.backends.ModelBackend"]


@pytest.fixture(autouse=True)
def _backend_first(settings: Any) -> None:
    settings.AUTHENTICATION_BACKENDS = BACKENDS


@pytest.fixture
def victim() -> User:
    return User.objects.create_user("victim", password="right-password", is_staff=True)


@pytest.fixture
def bystander() -> User:
    return User.objects.create_user("bystander", password="bystander-password")


def sign_in(client: Client, username: str, password: str, ip: str = "198.51.100.1") -> int:
    data = {"username": username, "password": password}
    return client.post("/accounts/login/", data, REMOTE_ADDR=ip).status_code


def per_username(limit: int = 3, **fields: Any) -> Any:
    return username_sign_in_policy(limit, **fields)


def test_login_view_failures_are_counted_and_then_every_sign_in_refused(client, victim):
    per_username(limit=3)
    # A wrong password answers 200 and the form again: no status tells the failure.
    assert [sign_in(client, "victim", "guess") for _ in range(3)] == [200] * 3
    assert sign_in(client, "victim", "guess") == 429
    # The right password is refused too while the limit holds.
    assert sign_in(client, "victim", "right-password") == 429


def test_the_username_policy_counts_across_addresses_and_spares_a_bystander(
    client, victim, bystander
):
    per_username(limit=2)
    assert sign_in(client, "victim", "guess", ip="203.0.113.1") == 200
    assert sign_in(client, "victim", "guess", ip="203.0.113.2") == 200
    assert sign_in(client, "victim", "guess", ip="203.0.113.3") == 429
    # Case is no way around it.
    assert sign_in(client, "VICTIM ", "guess", ip="203.0.113.4") == 429
    # Another account, from the same addresses, signs in.
    assert sign_in(client, "bystander", "bystander-password", ip="203.0.113.3") == 302


def test_a_successful_sign_in_spends_nothing(client, victim):
    per_username(limit=2)
    for _ in range(4):
        assert sign_in(Client(), "victim", "right-password") == 302
    assert [sign_in(client, "victim", "guess") for _ in range(3)] == [200, 200, 429]


def test_the_username_is_never_readable_in_redis(client, victim, redis_client):
    per_username()
    sign_in(client, "victim", "guess")
    keys = redis_client.keys("*")
    assert keys
    assert not any(b"victim" in key for key in keys)
    assert any(username_identity("victim").encode() in key for key in keys)


def test_a_per_address_policy_counts_every_username_from_one_address(client, victim, bystander):
    create_policy(
        "sign-in-ip",
        "*",
        limit=3,
        window=600,
        key="ip",
        counts="sign_in_failures",
        fail_open=False,
    )
    for name in ("victim", "bystander", "nobody"):
        assert sign_in(client, name, "guess", ip="203.0.113.7") == 200
    assert sign_in(client, "someone-else", "guess", ip="203.0.113.7") == 429
    assert sign_in(client, "victim", "right-password", ip="203.0.113.8") == 302


def test_the_admin_login_is_protected(client, victim):
    per_username(limit=2)
    data = {"username": "victim", "password": "guess", "next": "/admin/"}
    assert [client.post("/admin/login/", data).status_code for _ in range(3)] == [200, 200, 429]
    data["password"] = "right-password"
    assert client.post("/admin/login/", data).status_code == 429


def test_drf_basic_and_obtain_auth_token_are_protected(client, victim):
    per_username(limit=2)
    wrong = base64.b64encode(b"victim:guess").decode()
    assert client.get("/basic/", HTTP_AUTHORIZATION=f"Basic {wrong}").status_code == 401
    token = client.post("/obtain-token/", {"username": "victim", "password": "guess"})
    assert token.status_code == 400
    right = base64.b64encode(b"victim:right-password").decode()
    assert client.get("/basic/", HTTP_AUTHORIZATION=f"Basic {right}").status_code == 429
    token = client.post("/obtain-token/", {"username": "victim", "password": "right-password"})
    assert token.status_code == 429


def test_a_lockout_holds_and_a_reset_lifts_it(client, victim):
    per_username(limit=2, lockout=900)
    # The failure that spends the last unit is answered as locked already (as axes does).
    assert [sign_in(client, "victim", "guess") for _ in range(3)] == [200, 429, 429]
    assert sign_in(client, "victim", "right-password") == 429
    # The operator sees the lockout by the attempted username, and lifts it.
    shown = run("inspect", "--policy", "sign-in-username", "--identity", "username:victim")
    assert "locked" in shown
    run("reset", "--policy", "sign-in-username", "--identity", "username:victim", "--yes")
    assert sign_in(client, "victim", "right-password") == 302


def test_aauthenticate_is_refused_on_the_event_loop_too(victim):
    per_username(limit=2)

    async def attempt(password: str) -> Any:
        request = RequestFactory().post("/accounts/login/")
        return await aauthenticate(request, username="victim", password=password)

    # A request made by hand is never closed, so its attempt keeps its unit: 2 spent.
    assert async_to_sync(attempt)("right-password") == victim
    assert async_to_sync(attempt)("guess") is None
    # Over the limit: the right password is refused before it is checked.
    assert async_to_sync(attempt)("right-password") is None


def test_sign_in_policies_are_not_decided_by_the_other_faces(client, victim, redis_client):
    """A sign-in policy matching every path spends nothing for a request that signs
    nobody in."""
    per_username(limit=1)
    create_policy("sign-in-ip", "*", limit=1, window=600, key="ip", counts="sign_in_failures")
    for _ in range(3):
        assert client.get("/accounts/login/").status_code == 200
    assert redis_client.keys("rl:{*") == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("patient_redis")
def test_stuffing_one_username_from_16_addresses_counts_exactly_the_limit(victim, bystander):
    """16 threads, 16 addresses, one username, limit 3: exactly 3 passwords are checked
    and fail; the 13 others are refused before the check. The right password is refused
    while the limit holds and accepted after a reset; the bystander is never touched."""
    per_username(limit=3)
    checked: list[str] = []

    def count_failure(sender: Any, credentials: Any = None, **kwargs: Any) -> None:
        checked.append(credentials["username"])

    results: list[int] = []
    start = threading.Barrier(16)

    def stuff(index: int) -> None:
        client = Client()
        start.wait()
        results.append(sign_in(client, "victim", f"guess-{index}", ip=f"203.0.113.{index + 1}"))

    user_login_failed.connect(count_failure)
    try:
        threads = [threading.Thread(target=stuff, args=(i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        user_login_failed.disconnect(count_failure)
    assert sorted(results) == [200] * 3 + [429] * 13
    # Every attempt failed (user_login_failed fired 16 times), but only 3 reached the
    # password check: the others were refused by the backend first. Redis holds 3.
    assert len(checked) == 16
    assert sign_in(Client(), "victim", "right-password") == 429
    assert sign_in(Client(), "bystander", "bystander-password") == 302
    call_command("ratelimits", "reset", "--policy", "sign-in-username", "--yes")
    assert sign_in(Client(), "victim", "right-password") == 302


def test_force_login_still_works_with_the_backend_first(victim):
    """The test client ties a session to the first backend with a get_user: never this
    one, which authenticates nobody."""
    client = Client()
    client.force_login(victim)
    assert client.get("/admin/").status_code == 200
