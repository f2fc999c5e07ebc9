"""Red team, second round, hole 3: lockout as denial of service, and the way back in.

Adding ``RateLimitBackend`` made every ``login(request, user)`` without ``backend=`` fail
with Django's "multiple authentication backends configured" ``ValueError``: a 500 on a
sign-up view and on ``PasswordResetConfirmView(post_reset_login=True)``. And a completed
password reset left the lockout in place: the new password got a 429. Against the real
Redis, with Django's own views."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, SESSION_KEY, login
from django.contrib.auth.models import User
from django.contrib.auth.tokens import default_token_generator
from django.test import Client, RequestFactory
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from ratelimits.backends import login_backend
from tests.helpers import create_policy

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.account_urls")]

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
IP = "203.0.113.9"


@pytest.fixture(autouse=True)
def _backend_first(settings: Any) -> None:
    settings.AUTHENTICATION_BACKENDS = ["ratelimits.backends.RateLimitBackend", MODEL_BACKEND]


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice", "alice@example.com", "old-password-1")


def lock_out(username: str = "alice", key: str = "username") -> None:
    create_policy(
        f"signin-{key.replace('+', '-')}",
        "*",
        limit=3,
        window=900,
        key=key,
        counts="sign_in_failures",
        lockout=900,
    )
    for _ in range(3):
        sign_in(username, "guess")
    assert sign_in(username, "guess") == 429


def sign_in(username: str, password: str, client: Client | None = None) -> int:
    data = {"username": username, "password": password}
    return (client or Client()).post("/accounts/login/", data, REMOTE_ADDR=IP).status_code


def test_a_sign_up_view_that_logs_in_without_a_backend_works():
    client = Client()
    data = {
        "username": "carol",
        "password1": "a-long-pass-phrase",
        "password2": "a-long-pass-phrase",
    }
    response = client.post("/accounts/sign-up/", data, REMOTE_ADDR=IP)
    assert response.status_code == 302  # was a 500
    assert client.session[BACKEND_SESSION_KEY] == MODEL_BACKEND
    assert client.session[SESSION_KEY] == str(User.objects.get(username="carol").pk)


def test_a_completed_password_reset_logs_in_and_lifts_the_lockout(alice: User):
    lock_out()
    client = Client()
    uid = urlsafe_base64_encode(force_bytes(alice.pk))
    token = default_token_generator.make_token(alice)
    form_url = client.get(f"/accounts/reset/{uid}/{token}/", REMOTE_ADDR=IP)["Location"]
    new = {"new_password1": "new-pass-phrase-2", "new_password2": "new-pass-phrase-2"}
    done = client.post(form_url, new, REMOTE_ADDR=IP)
    assert done.status_code == 302 and done["Location"] == "/done/"  # was a 500
    assert client.session[SESSION_KEY] == str(alice.pk)
    assert client.session[BACKEND_SESSION_KEY] == MODEL_BACKEND
    # The lockout is lifted: the new password signs in at once (it got a 429).
    assert sign_in("alice", "new-pass-phrase-2") == 302


def test_a_password_change_anywhere_lifts_the_lockout(alice: User):
    lock_out()
    alice.set_password("changed-by-the-admin-3")
    alice.save()
    assert sign_in("alice", "changed-by-the-admin-3") == 302


def test_a_save_without_a_new_password_lifts_nothing(alice: User):
    lock_out()
    alice.first_name = "Alice"
    alice.save()
    assert sign_in("alice", "old-password-1") == 429


def test_another_users_new_password_lifts_nothing(alice: User):
    lock_out()
    bob = User.objects.create_user("bob", password="bob-password-1")
    bob.set_password("bob-password-2")
    bob.save()
    assert sign_in("alice", "old-password-1") == 429


def test_a_user_from_authenticate_keeps_its_own_backend(alice: User):
    request = RequestFactory().get("/")
    request.session = Client().session
    alice.backend = "tests.some.OtherBackend"
    login(request, alice)
    assert request.session[BACKEND_SESSION_KEY] == "tests.some.OtherBackend"


def test_with_two_backends_besides_it_djangos_own_choice_stands(settings: Any, alice: User):
    """Django refuses to guess between two real backends; ratelimits does not guess for it."""
    settings.AUTHENTICATION_BACKENDS = [
        "ratelimits.backends.RateLimitBackend",
        MODEL_BACKEND,
        "django.contrib.auth.backends.RemoteUserBackend",
    ]
    assert login_backend() is None
    request = RequestFactory().get("/")
    request.session = Client().session
    fresh = User.objects.get(pk=alice.pk)
    with pytest.raises(ValueError, match="multiple authentication backends"):
        login(request, fresh)


def test_without_the_backend_nothing_changes(settings: Any):
    settings.AUTHENTICATION_BACKENDS = [MODEL_BACKEND]
    assert login_backend() is None
