"""Who a request counts against, and that the Redis key built from it stays bounded."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest
from django.test import RequestFactory, override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ratelimits.engine import keys
from ratelimits.engine.identity import header_identity, ip_identity, user_identity
from ratelimits.engine.policy import CompiledPolicy
from ratelimits.http.facts import client_ip, request_identity

HASHED_HEADER = re.compile(r"h:[0-9a-f]{32}")
HASHED_USER = re.compile(r"u#[0-9a-f]{32}")
LONGEST_PREFIX = "p" * 32
LONGEST_NAME = "n" * 64

rf = RequestFactory()


def request(**meta: Any) -> HttpRequest:
    """A GET request from 198.51.100.7 (``REMOTE_ADDR``) with extra ``META`` entries."""
    return rf.get("/api/search/", **{"REMOTE_ADDR": "198.51.100.7", **meta})


def header_policy(name: str = "api-key") -> CompiledPolicy:
    return CompiledPolicy.build(
        name=name,
        endpoint="api:search",
        algorithm="sliding_counter",
        limit=5,
        window=60,
        key="header:X-Api-Key",
    )


def user_policy(name: str = "per-user") -> CompiledPolicy:
    return CompiledPolicy.build(
        name=name, endpoint="api:search", algorithm="sliding_counter", limit=5, window=60
    )


def assert_bounded(key: str, identity: str) -> None:
    """A key is short, has one hash tag, and that tag is exactly ``identity``."""
    assert len(key) <= keys.MAX_KEY_LENGTH, len(key)
    assert key.count("{") == 1, key[:200]
    assert key.count("}") == 1, key[:200]
    parsed = keys.KEY_PATTERN.match(key)
    assert parsed is not None, key[:200]
    assert parsed["identity"] == identity


# --- client_ip: X-Forwarded-For trusted only as far as NUM_PROXIES -------------------------


def test_no_proxies_ignores_a_forged_forwarded_for() -> None:
    with override_settings(RATELIMITS={"NUM_PROXIES": 0}):
        req = request(HTTP_X_FORWARDED_FOR="6.6.6.6")
        assert client_ip(req.META) == "198.51.100.7"
        assert request_identity("ip", req) == "ip:198.51.100.7"


@pytest.mark.parametrize(
    "forwarded",
    [
        "203.0.113.9",
        "6.6.6.6, 203.0.113.9",
        "1.1.1.1,6.6.6.6,  203.0.113.9",
        "garbage, 6.6.6.6, 203.0.113.9",
    ],
)
def test_one_proxy_takes_the_rightmost_address(forwarded: str) -> None:
    """Entries the client writes on the left cannot change who it is."""
    with override_settings(RATELIMITS={"NUM_PROXIES": 1}):
        req = request(HTTP_X_FORWARDED_FOR=forwarded)
        assert client_ip(req.META) == "203.0.113.9"
        assert request_identity("ip", req) == "ip:203.0.113.9"


def test_two_proxies_take_the_second_address_from_the_right() -> None:
    with override_settings(RATELIMITS={"NUM_PROXIES": 2}):
        req = request(HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.9, 10.0.0.2")
        assert client_ip(req.META) == "203.0.113.9"


@pytest.mark.parametrize("forwarded", ["not-an-ip", "6.6.6.6, 999.1.1.1", " , ", "6.6.6.6, "])
def test_garbage_at_the_trusted_position_falls_back_to_remote_addr(forwarded: str) -> None:
    with override_settings(RATELIMITS={"NUM_PROXIES": 1}):
        req = request(HTTP_X_FORWARDED_FOR=forwarded)
        expected = "6.6.6.6" if forwarded == "6.6.6.6, " else "198.51.100.7"
        assert client_ip(req.META) == expected


@pytest.mark.parametrize("proxies", [0, 1])
def test_x_real_ip_is_never_read(proxies: int) -> None:
    with override_settings(RATELIMITS={"NUM_PROXIES": proxies}):
        req = request(HTTP_X_REAL_IP="6.6.6.6")
        assert client_ip(req.META) == "198.51.100.7"
        assert request_identity("ip", req) == "ip:198.51.100.7"


# --- ip_identity ----------------------------------------------------------------------------


def test_ipv4_is_kept() -> None:
    assert ip_identity("203.0.113.7") == "ip:203.0.113.7"
    assert ip_identity(" 203.0.113.7 ") == "ip:203.0.113.7"


def test_ipv6_is_grouped_by_its_64() -> None:
    one = ip_identity("2001:db8:1:2::1")
    assert one == "ip:2001:db8:1:2::/64"
    assert ip_identity("2001:db8:1:2:ffff:ffff:ffff:fffe") == one
    assert ip_identity("2001:db8:1:3::1") != one


def test_ipv6_prefix_128_keeps_addresses_apart() -> None:
    with override_settings(RATELIMITS={"IPV6_PREFIX": 128}):
        assert ip_identity("2001:db8:1:2::1") == "ip:2001:db8:1:2::1"
        assert ip_identity("2001:db8:1:2::2") == "ip:2001:db8:1:2::2"


def test_ipv6_prefix_48_groups_wider() -> None:
    with override_settings(RATELIMITS={"IPV6_PREFIX": 48}):
        assert ip_identity("2001:db8:1:2::1") == ip_identity("2001:db8:1:3::1")
        assert ip_identity("2001:db8:1:2::1") == "ip:2001:db8:1::/48"


def test_ipv4_mapped_ipv6_is_the_ipv4_address() -> None:
    assert ip_identity("::ffff:1.2.3.4") == "ip:1.2.3.4"
    assert ip_identity("::ffff:1.2.3.4") == ip_identity("1.2.3.4")


@pytest.mark.parametrize("address", ["", "garbage", "999.1.1.1", "1.2.3", "{x}", "::g"])
def test_garbage_is_unknown(address: str) -> None:
    assert ip_identity(address) == "ip:unknown"


def test_a_scoped_ipv6_address_loses_its_scope_in_a_64() -> None:
    assert ip_identity("fe80::1%{evil}") == "ip:fe80::/64"


def test_a_scoped_ipv6_address_in_forwarded_for_keeps_the_key_bounded() -> None:
    with override_settings(RATELIMITS={"NUM_PROXIES": 1, "IPV6_PREFIX": 128}):
        req = request(HTTP_X_FORWARDED_FOR="fe80::1%}{" + "x" * 500)
        identity = request_identity("ip", req)
        assert identity is not None
        assert_bounded(user_policy().key_for(identity), identity)


# --- user_identity --------------------------------------------------------------------------


def test_an_int_pk_is_readable() -> None:
    assert user_identity(42) == "u:42"


def test_an_email_pk_is_hashed() -> None:
    identity = user_identity("alice@example.com")
    assert HASHED_USER.fullmatch(identity)
    assert "alice" not in identity
    assert identity == user_identity("alice@example.com")
    assert identity != user_identity("bob@example.com")


def test_the_hash_is_keyed_by_the_secret_key() -> None:
    before = user_identity("alice@example.com")
    with override_settings(SECRET_KEY="another-secret-key-for-this-test-only-0123456789"):
        assert user_identity("alice@example.com") != before
    assert user_identity("alice@example.com") == before


def test_a_uuid_pk_stays_readable() -> None:
    pk = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert user_identity(pk) == "u:12345678-1234-5678-1234-567812345678"


def test_a_pk_with_a_trailing_newline_is_hashed() -> None:
    assert HASHED_USER.fullmatch(user_identity("abc\n"))


# --- header identities ----------------------------------------------------------------------


def test_a_header_value_never_appears_in_the_identity() -> None:
    policy = header_policy()
    assert policy.header_meta_key == "HTTP_X_API_KEY"
    identity = request_identity(
        "header", request(HTTP_X_API_KEY="sk-live-abcdef123456"), policy.header_meta_key
    )
    assert identity is not None
    assert HASHED_HEADER.fullmatch(identity)
    assert "abcdef" not in policy.key_for(identity)


def test_same_header_value_same_identity_and_different_value_differs() -> None:
    meta_key = header_policy().header_meta_key
    first = request_identity("header", request(HTTP_X_API_KEY="token-1"), meta_key)
    again = request_identity(
        "header", request(HTTP_X_API_KEY="token-1", REMOTE_ADDR="192.0.2.1"), meta_key
    )
    other = request_identity("header", request(HTTP_X_API_KEY="token-2"), meta_key)
    assert first == again
    assert first != other


def test_different_header_names_with_the_same_value_differ() -> None:
    assert header_identity("HTTP_X_API_KEY", "v") != header_identity("HTTP_X_CLIENT_ID", "v")


@pytest.mark.parametrize("value", [None, ""])
def test_a_missing_header_falls_back_to_the_ip(value: str | None) -> None:
    meta = {} if value is None else {"HTTP_X_API_KEY": value}
    req = request(**meta)
    identity = request_identity("header", req, header_policy().header_meta_key)
    assert identity == "ip:198.51.100.7"


# --- bounded keys whatever the input -------------------------------------------------------

NASTY_HEADER_VALUES: dict[str, str | bytes] = {
    "1 MB": "k" * 1_000_000,
    "emoji": "🔑🚀" * 200,
    "rtl": "\u202eyek-ipa\u202c שלום مرحبا",
    "control": "\x1b[31m\r\n\t\x7f",
    "nul": "abc\x00def\x00",
    "braces": "}{evil}{",
    "latin-1 bytes": b"caf\xe9 \xff\xfe secret",
}


@pytest.mark.parametrize("value", NASTY_HEADER_VALUES.values(), ids=NASTY_HEADER_VALUES.keys())
def test_header_keys_are_bounded(value: str | bytes) -> None:
    policy = header_policy(LONGEST_NAME)
    req = request()
    req.META["HTTP_X_API_KEY"] = value
    with override_settings(RATELIMITS={"KEY_PREFIX": LONGEST_PREFIX}):
        identity = request_identity("header", req, policy.header_meta_key)
        assert identity is not None
        key = policy.key_for(identity)
    assert HASHED_HEADER.fullmatch(identity)
    assert_bounded(key, identity)
    raw = value.decode("latin-1") if isinstance(value, bytes) else value
    assert raw not in key


def test_latin_1_bytes_and_their_text_are_the_same_client() -> None:
    assert header_identity("HTTP_X_API_KEY", b"caf\xe9") == header_identity(
        "HTTP_X_API_KEY", "café"
    )


NASTY_PKS: list[Any] = [
    "x" * 100_000,
    "alice@example.com",
    "{1}",
    "{}}",
    "🔑",
    "a\x00b",
    "x" * 41,
    10**60,
    uuid.uuid4(),
]


@pytest.mark.parametrize("pk", NASTY_PKS, ids=lambda pk: repr(pk)[:20])
def test_user_keys_are_bounded(pk: Any) -> None:
    policy = user_policy(LONGEST_NAME)
    with override_settings(RATELIMITS={"KEY_PREFIX": LONGEST_PREFIX}):
        identity = user_identity(pk)
        key = policy.key_for(identity)
    assert_bounded(key, identity)
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", str(pk)):
        assert HASHED_USER.fullmatch(identity)
        assert str(pk) not in key


any_text = st.text(st.characters(exclude_categories=()))


@settings(
    max_examples=200,
    deadline=None,
    # The autouse fixture only flushes Redis, which these pure functions never touch.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(value=any_text)
def test_any_header_value_gives_a_bounded_hashed_key(value: str) -> None:
    policy = header_policy(LONGEST_NAME)
    req = request()
    req.META["HTTP_X_API_KEY"] = value
    identity = request_identity("header", req, policy.header_meta_key)
    assert identity is not None
    if value:
        assert HASHED_HEADER.fullmatch(identity)
    else:
        assert identity == "ip:198.51.100.7"
    assert_bounded(policy.key_for(identity), identity)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(pk=any_text | st.integers())
def test_any_user_pk_gives_a_bounded_key(pk: str | int) -> None:
    identity = user_identity(pk)
    assert_bounded(user_policy(LONGEST_NAME).key_for(identity), identity)
    if identity.startswith("u#"):
        assert HASHED_USER.fullmatch(identity)
    else:
        # Kept readable only when it is the pk itself and short (41: 40 characters and the
        # trailing newline of the bug documented by test_a_pk_with_a_trailing_newline_is_hashed).
        assert identity == f"u:{pk}"
        assert 1 <= len(str(pk)) <= 41


# --- which kind of identity applies ---------------------------------------------------------


def test_user_key_does_not_count_anonymous_requests() -> None:
    req = request()
    req.user = AnonymousUser()
    assert request_identity("user", req) is None
    assert request_identity("user", request()) is None  # no auth middleware at all


def test_user_or_ip_is_the_ip_when_anonymous() -> None:
    req = request()
    req.user = AnonymousUser()
    assert request_identity("user_or_ip", req) == "ip:198.51.100.7"
    assert request_identity("user_or_ip", request()) == "ip:198.51.100.7"


@pytest.mark.django_db
def test_user_and_user_or_ip_are_the_user_when_logged_in(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user(username="alice", password="pw")
    req = request()
    req.user = user
    assert request_identity("user", req) == f"u:{user.pk}"
    assert request_identity("user_or_ip", req) == f"u:{user.pk}"
    # The IP no longer matters: the same user from elsewhere is the same client.
    other = request(REMOTE_ADDR="192.0.2.1")
    other.user = user
    assert request_identity("user_or_ip", other) == f"u:{user.pk}"


def test_global_is_one_counter() -> None:
    assert request_identity("global", request()) == "global"
    assert request_identity("global", request(REMOTE_ADDR="192.0.2.1")) == "global"
