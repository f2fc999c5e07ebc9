"""Red team, second round: client addresses and the headers that tell them, replayed
through Django's test client against the real Redis.

The site's sign-in form, under sign-in policies (``counts = "sign_in_failures"``) of 3
failures per address or per username, decided by ``RateLimitBackend``:

- an unclosed quote a client writes in ``Forwarded`` swallowed the element the trusted
  proxy appended, and the request counted as the proxy itself: with the proxies' network
  exempt (internal monitors), 10 password checks at limit 3;
- the ``RateLimit`` header of a sign-in told anyone how many failures an account had
  left before its lockout;
- a ``Forwarded`` header that disagreed with the proxy's ``X-Forwarded-For`` was a
  second counter the client chose (``ip:unknown``);
- an 8 KB forwarding header of distinct garbage was parsed whole before the walk, every
  hop of it, on every request;
- every IPv4 client behind a NAT64 translator shared one counter (``ip:64:ff9b::/64``).

Served by gunicorn behind a forwarding hop: tests/security/test_forged_addresses.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client

from ratelimits.http import forwarded
from tests.helpers import create_policy, ratelimits_settings

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.security.auth_urls")]

BACKENDS = ["ratelimits.backends.RateLimitBackend", "django.contrib.auth.backends.ModelBackend"]
PROXY = "10.0.0.1"
CLIENT = "198.51.100.9"
LIMIT = 3


@pytest.fixture(autouse=True)
def _site(settings: Any) -> None:
    """``RateLimitBackend`` first; the proxies at 10.0.0.0/8 trusted, and that network
    exempt (internal monitors reach the site from it too)."""
    settings.AUTHENTICATION_BACKENDS = BACKENDS
    settings.RATELIMITS = ratelimits_settings(
        TRUSTED_PROXIES=["10.0.0.0/8"], EXEMPT_NETWORKS=["10.0.0.0/8"]
    )


@pytest.fixture
def victim() -> User:
    return User.objects.create_user("victim", password="right-password")


def per_address(limit: int = LIMIT) -> None:
    create_policy(
        "signin-address", "*", limit=limit, window=900, key="ip", counts="sign_in_failures"
    )


def per_username(limit: int = 5) -> None:
    create_policy(
        "signin-username", "*", limit=limit, window=900, key="username", counts="sign_in_failures"
    )


def sign_in(client: Client, password: str = "guess", username: str = "victim", **meta: str) -> Any:
    """A POST of the sign-in form, through the proxy unless ``meta`` says otherwise."""
    meta.setdefault("REMOTE_ADDR", PROXY)
    data = {"username": username, "password": password}
    return client.post("/accounts/login/", data, **meta)


def checked(statuses: list[int]) -> int:
    """How many of the attempts had their password checked (a wrong one answers 200)."""
    return statuses.count(200)


def counted(redis_client: redis.Redis, policy: str) -> list[str]:
    """The identities counted under ``policy`` in Redis."""
    return sorted(
        {
            key.decode().split("}")[0][len("rl:{") :]
            for key in redis_client.scan_iter(match=f"rl:{{*}}:{policy}:*")
        }
    )


# --- an unclosed quote in Forwarded ------------------------------------------------------------


def test_an_unclosed_quote_never_swallows_what_the_proxy_appended(client, victim, redis_client):
    """The client sends ``Forwarded: for="``; the proxy appends ``, for=198.51.100.9``.
    Before: the value was one bad element, the walk found nothing, and the request
    counted as the proxy (exempt): 10 password checks at limit 3."""
    per_address()
    statuses = [
        sign_in(client, HTTP_FORWARDED=f'for=", for={CLIENT}').status_code for _ in range(10)
    ]
    assert checked(statuses) == LIMIT
    assert statuses == [200] * LIMIT + [429] * (10 - LIMIT)
    assert counted(redis_client, "signin-address") == [f"ip:{CLIENT}"]


@pytest.mark.parametrize(
    "value",
    ['for="', "for=unknown", "for=_hidden", "for=", ",", f'for="{CLIENT}'],
)
def test_an_unreadable_header_from_the_proxy_is_unknown_never_the_exempt_proxy(
    client, victim, redis_client, value
):
    """Nothing readable from a trusted sender: ``ip:unknown``, limited, never exempt.
    Before: the proxy's own address, exempt: every attempt checked."""
    per_address()
    statuses = [sign_in(client, HTTP_FORWARDED=value).status_code for _ in range(LIMIT + 2)]
    assert checked(statuses) == LIMIT
    assert counted(redis_client, "signin-address") == ["ip:unknown"]


def test_garbage_behind_a_trusted_hop_is_unknown_never_that_hop(client, victim, redis_client):
    """``X-Forwarded-For: garbage, 10.0.0.8``: a trusted hop, then nothing readable.
    Before: 10.0.0.8, in the exempt network."""
    per_address()
    xff = "garbage, 10.0.0.8"
    statuses = [sign_in(client, HTTP_X_FORWARDED_FOR=xff).status_code for _ in range(LIMIT + 2)]
    assert checked(statuses) == LIMIT
    assert counted(redis_client, "signin-address") == ["ip:unknown"]


def test_a_request_the_proxy_sends_itself_is_still_exempt(client, victim):
    """The exemption the attack abused still works for what it is for."""
    per_address()
    statuses = [sign_in(client).status_code for _ in range(LIMIT + 2)]
    assert checked(statuses) == LIMIT + 2


# --- the RateLimit header of a sign-in ---------------------------------------------------------


def rate_limit_fields(response: Any) -> tuple[str | None, str | None]:
    return response.headers.get("RateLimit-Policy"), response.headers.get("RateLimit")


def test_a_stranger_cannot_read_how_many_guesses_an_account_has_left(victim):
    """Before: a probe of ``victim`` read ``"signin-username";r=4``; the owner mistyped
    twice; the next probe read ``r=1``."""
    per_username(limit=5)
    stranger, owner = Client(), Client()
    probe = sign_in(stranger, REMOTE_ADDR="203.0.113.66")
    assert probe.status_code == 200
    before = rate_limit_fields(probe)
    for _ in range(2):
        assert sign_in(owner, "typo", REMOTE_ADDR="192.0.2.10").status_code == 200
    after = rate_limit_fields(sign_in(stranger, REMOTE_ADDR="203.0.113.66"))
    assert before == after == (None, None)
    # The fifth failure, then the refusal: it keeps its Retry-After, and says no more.
    assert rate_limit_fields(sign_in(stranger, REMOTE_ADDR="203.0.113.66")) == (None, None)
    refused = sign_in(stranger, REMOTE_ADDR="203.0.113.66")
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert rate_limit_fields(refused) == (None, None)


def test_the_address_policy_beside_it_still_shows_its_numbers(victim):
    """The client's own numbers (its address's) are its business: they stay."""
    per_username(limit=5)
    per_address(limit=20)
    response = sign_in(Client(), REMOTE_ADDR="203.0.113.66")
    assert rate_limit_fields(response) == (
        '"signin-address";q=20;w=900',
        '"signin-address";r=19;t=900',
    )


# --- Forwarded beside the proxy's X-Forwarded-For ----------------------------------------------


def test_a_forwarded_header_the_proxy_does_not_write_is_no_second_counter(
    client, victim, redis_client, settings
):
    """nginx appends to ``X-Forwarded-For`` and passes a client's ``Forwarded`` through.
    A client that sends one that disagrees counted as ``ip:unknown``: a second counter of
    its choosing, 6 checks at limit 3. ``FORWARDED_HEADER`` names the one header read."""
    settings.RATELIMITS = {**settings.RATELIMITS, "FORWARDED_HEADER": "X-Forwarded-For"}
    per_address()
    statuses = [sign_in(client, HTTP_X_FORWARDED_FOR=CLIENT).status_code for _ in range(LIMIT)]
    statuses += [
        sign_in(client, HTTP_X_FORWARDED_FOR=CLIENT, HTTP_FORWARDED="for=6.6.6.6").status_code
        for _ in range(LIMIT)
    ]
    assert checked(statuses) == LIMIT
    assert counted(redis_client, "signin-address") == [f"ip:{CLIENT}"]


# --- a large header of distinct garbage --------------------------------------------------------


def test_a_large_header_is_read_only_as_far_as_the_walk_goes(client, victim, monkeypatch):
    """8 KB of distinct entries left of what the proxy appended: each request parses the
    hops the walk reads (the client's, and the sender), not the 750 entries before them
    (about 7 ms of CPU each, and a flush of the 4,096-entry address cache every six
    requests, before). The cost, measured: CHANGELOG.md."""
    per_address(limit=1000)
    parsed: list[str] = []
    real = forwarded._address

    def counting(text: str) -> Any:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(forwarded, "_address", counting)
    for round_ in range(5):  # each round's entries are new to the address cache
        entries = [f"{round_:x}{i:x}.{i}" for i in range(1100)]
        headers = {
            "HTTP_X_FORWARDED_FOR": ", ".join([*entries, CLIENT]),
            "HTTP_FORWARDED": ", ".join(f"for={entry}" for entry in [*entries, CLIENT]),
        }
        for header, value in headers.items():
            assert len(value) > 8192
            parsed.clear()
            assert sign_in(client, **{header: value}).status_code == 200
            assert len(parsed) <= 2, (header, len(parsed))


# --- NAT64 --------------------------------------------------------------------------------------


def test_ipv4_clients_behind_a_nat64_translator_count_apart(client, victim, redis_client):
    """An IPv6-only site reached by IPv4 clients through the well-known prefix. Before:
    the second client, from another IPv4 address, was refused with the first's failures."""
    per_address()
    first = [
        sign_in(client, REMOTE_ADDR="64:ff9b::198.51.100.7").status_code for _ in range(LIMIT + 1)
    ]
    second = sign_in(client, REMOTE_ADDR="64:ff9b::203.0.113.9").status_code
    assert (first, second) == ([200] * LIMIT + [429], 200)
    assert counted(redis_client, "signin-address") == ["ip:198.51.100.7", "ip:203.0.113.9"]


def test_a_local_nat64_prefix_counts_by_the_embedded_address(
    client, victim, redis_client, settings
):
    settings.RATELIMITS = {
        **settings.RATELIMITS,
        "NAT64_PREFIXES": ["64:ff9b::/96", "2001:db8:64::/96"],
    }
    per_address()
    assert sign_in(client, REMOTE_ADDR="2001:db8:64::198.51.100.7").status_code == 200
    assert sign_in(client, REMOTE_ADDR="2001:db8:64::203.0.113.9").status_code == 200
    assert counted(redis_client, "signin-address") == ["ip:198.51.100.7", "ip:203.0.113.9"]
