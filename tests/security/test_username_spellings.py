"""Red team, second round, hole 2: the per-username count was evaded wherever the site's
lookup is case-insensitive. ``casefold`` keeps the dotless i (U+0131) apart from ``i``,
but PostgreSQL's ``UPPER`` (Django's ``username__iexact``, allauth's ``email__iexact``)
maps it to ``I``: one account under 2^k spellings, each its own counter (24 password
checks at limit 3 against ``william.king``, and the right password went in through a
dotless spelling). Replayed on SQLite and PostgreSQL (``RATELIMITS_TEST_DATABASE``):
every spelling a case- or accent-insensitive lookup accepts now shares one counter, and
``RATELIMITS["SIGN_IN_ACCOUNT"]`` counts by the account a site's own lookup finds."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.test import Client

from ratelimits.engine.keys.identity import username_identity
from ratelimits.engine.keys.usernames import fold
from tests.helpers import create_policy

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.auth_urls")]

DOTLESS = "\u0131"
#: Every spelling of william.king with some of its i's dotless: 2^3.
SPELLINGS = [
    "w{}ll{}am.k{}ng".format(*letters) for letters in itertools.product("i" + DOTLESS, repeat=3)
]
checked: list[str] = []


class IexactBackend(ModelBackend):
    """A site's case-insensitive lookup (as allauth's and many e-mail backends are); it
    notes every password it checks."""

    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> Any:
        checked.append(username or "")
        user = User.objects.filter(username__iexact=username).first()
        if user is not None and user.check_password(password):
            return user
        return None


def by_email(request: Any, credentials: Mapping[str, Any]) -> str | None:
    """A SIGN_IN_ACCOUNT hook: the account an e-mail or a username names."""
    typed = credentials.get("username") or ""
    user = User.objects.filter(email__iexact=typed).first() if "@" in typed else None
    return None if user is None else user.get_username()


@pytest.fixture(autouse=True)
def _site(settings: Any) -> None:
    settings.AUTHENTICATION_BACKENDS = [
        "ratelimits.backends.RateLimitBackend",
        f"{__name__}.IexactBackend",
    ]
    checked.clear()
    User.objects.create_user("william.king", "will@example.com", "right-password")
    create_policy(
        "signin-username",
        "*",
        limit=3,
        window=900,
        key="username",
        counts="sign_in_failures",
        lockout=900,
    )


def sign_in(username: str, password: str) -> int:
    data = {"username": username, "password": password}
    return Client().post("/accounts/login/", data, REMOTE_ADDR="203.0.113.5").status_code


def test_every_dotless_spelling_counts_as_one_username():
    statuses = [sign_in(spelling, "guess") for spelling in SPELLINGS for _ in range(3)]
    assert len(statuses) == 24
    assert len(checked) == 3  # was 24: eight counters of three
    assert statuses[:3] == [200, 200, 429]  # the third failure starts the lockout
    assert statuses.count(429) == 22
    # The right password, under any spelling, waits for the lockout.
    assert sign_in(SPELLINGS[-1], "right-password") == 429
    assert sign_in("william.king", "right-password") == 429


@pytest.mark.skipif(
    django_settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
    reason="PostgreSQL's UPPER is what maps the dotless i",
)
def test_postgresql_finds_the_account_under_a_dotless_spelling():
    """The threat is real there: the lookup finds william.king under every spelling."""
    assert all(User.objects.filter(username__iexact=s).count() == 1 for s in SPELLINGS)
    assert sign_in(SPELLINGS[-1], "right-password") == 302  # the owner, before any failure


@pytest.mark.parametrize(
    ("spelling", "plain"),
    [
        ("W\u0130LL\u0130AM", "william"),  # capital I with a dot
        ("\u017fam", "sam"),  # the long s
        ("\uff37\uff49\uff4c\uff4c", "will"),  # full-width letters
        ("Ren\u00e9", "rene"),  # an accent, composed
        ("Rene\u0301", "rene"),  # an accent, combining
        ("wi\u200bll", "will"),  # a zero-width space
        ("\u212aing", "king"),  # the Kelvin sign
        ("STRASSE", "stra\u00dfe"),
        ("  Alice ", "alice"),
    ],
)
def test_spellings_a_wide_lookup_takes_for_one_name_fold_together(spelling: str, plain: str):
    assert fold(spelling) == fold(plain)
    assert username_identity(spelling) == username_identity(plain)


def test_different_names_stay_apart():
    assert username_identity("alice") != username_identity("alicia")
    assert username_identity("bob") != username_identity("b0b")


def test_the_account_hook_counts_an_email_and_a_username_as_one_account(settings: Any):
    settings.RATELIMITS = {**settings.RATELIMITS, "SIGN_IN_ACCOUNT": f"{__name__}.by_email"}
    names = ["william.king", "WILL@example.com", "will@example.com", "william.king"]
    statuses = [sign_in(name, "guess") for name in names]
    assert statuses == [200, 200, 429, 429]
    assert len(checked) == 3


def test_an_account_hook_that_raises_counts_the_username_as_typed(settings: Any, caplog):
    settings.RATELIMITS = {**settings.RATELIMITS, "SIGN_IN_ACCOUNT": f"{__name__}.broken"}
    statuses = [sign_in("william.king", "guess") for _ in range(4)]
    assert statuses == [200, 200, 429, 429]
    assert "SIGN_IN_ACCOUNT" in caplog.text


def broken(request: Any, credentials: Mapping[str, Any]) -> str:
    raise RuntimeError("the directory is down")
