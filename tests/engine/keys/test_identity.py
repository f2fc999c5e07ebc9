"""The engine's identity forms (who a request counts as, given its facts) and that the
Redis key built from any of them stays bounded. What a Django request's facts are (its
address behind proxies, its user, its headers): tests/http/test_facts.py."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ratelimits.engine.keys.identity import (
    header_identity,
    ip_identity,
    principal,
    principal_identity,
    principal_text,
    user_identity,
)
from tests.helpers import (
    HASHED_HEADER,
    HASHED_USER,
    LONGEST_NAME,
    LONGEST_PREFIX,
    NASTY_HEADER_VALUES,
    assert_bounded,
    header_policy,
    user_policy,
)

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


def test_different_header_names_with_the_same_value_differ() -> None:
    assert header_identity("HTTP_X_API_KEY", "v") != header_identity("HTTP_X_CLIENT_ID", "v")


@pytest.mark.parametrize("value", ["token-1", b"token-1"])
def test_the_same_header_value_is_the_same_identity_and_another_differs(value: str | bytes) -> None:
    first = header_identity("HTTP_X_API_KEY", value)
    assert HASHED_HEADER.fullmatch(first)
    assert first == header_identity("HTTP_X_API_KEY", "token-1")
    assert first != header_identity("HTTP_X_API_KEY", "token-2")


# --- bounded keys whatever the input -------------------------------------------------------


@pytest.mark.parametrize("value", NASTY_HEADER_VALUES.values(), ids=NASTY_HEADER_VALUES.keys())
def test_header_identities_give_bounded_keys(value: str | bytes) -> None:
    """The identity of any header value is a hash, and its key is bounded (the request
    path to it: tests/http/test_facts.py)."""
    policy = header_policy(LONGEST_NAME)
    assert policy.header_meta_key is not None
    with override_settings(RATELIMITS={"KEY_PREFIX": LONGEST_PREFIX}):
        identity = header_identity(policy.header_meta_key, value)
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


# --- API principals (request.auth that is not a user) ---------------------------------------


class _KeyWithPk:
    pk = 17


class _NamedKey:
    def __str__(self) -> str:
        return "partner-7"


@pytest.mark.django_db
def test_a_principal_is_named_stably_and_hashed() -> None:
    from django.contrib.auth.models import Group

    group = Group.objects.create(name="partners")
    here = __name__
    assert principal_text("key-one") == "key-one"
    assert principal_text(b"key-one") == "key-one"
    assert principal_text(42) == "42"
    assert principal_text(group) == f"auth.group:{group.pk}"
    assert principal_text(_KeyWithPk()) == f"{here}._KeyWithPk:17"
    assert principal_text(_NamedKey()) == f"{here}._NamedKey:partner-7"
    # Nothing stable to name: counted as no principal (the address then, under user_or_ip).
    for nameless in (None, "", b"", True, False, object()):
        assert principal_text(nameless) is None
        assert principal(nameless) is None
    identity = principal("key-one")
    assert identity == principal_identity("key-one")
    assert re.fullmatch(r"a:[0-9a-f]{32}", identity or "")
    assert principal("key-two") != identity
    assert_bounded(user_policy(LONGEST_NAME).key_for(identity or ""), identity or "")


def test_a_principal_hash_depends_on_the_secret_key() -> None:
    before = principal_identity("key-one")
    with override_settings(SECRET_KEY="another-secret-key-for-this-test-only-0123456789"):
        assert principal_identity("key-one") != before
