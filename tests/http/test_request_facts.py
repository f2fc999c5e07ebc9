"""The facts of a Django request the engine needs (``ratelimits.http.request_facts``): the client
address behind trusted proxies, the identity a policy's key kind gives a request, and the
checks a request is decided by (exempt networks, overrides). The identity forms
themselves: tests/engine/keys/test_identity.py."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest
from django.test import RequestFactory, override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.table import current as table
from ratelimits.http import request_facts
from ratelimits.http.request_facts import client_ip, request_identity
from ratelimits.models import PolicyOverride
from tests.helpers import (
    HASHED_HEADER,
    LONGEST_NAME,
    LONGEST_PREFIX,
    NASTY_HEADER_VALUES,
    assert_bounded,
    assert_said_once_a_minute,
    header_policy,
    make_policy,
    remind_on,
    search_policy,
    user_policy,
)

rf = RequestFactory()


def request(**meta: Any) -> HttpRequest:
    """A GET request from 198.51.100.7 (``REMOTE_ADDR``) with extra ``META`` entries."""
    return rf.get("/api/search/", **{"REMOTE_ADDR": "198.51.100.7", **meta})


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


def test_a_scoped_ipv6_address_in_forwarded_for_keeps_the_key_bounded() -> None:
    with override_settings(RATELIMITS={"NUM_PROXIES": 1, "IPV6_PREFIX": 128}):
        req = request(HTTP_X_FORWARDED_FOR="fe80::1%}{" + "x" * 500)
        identity = request_identity("ip", req)
        assert identity is not None
        assert_bounded(user_policy().key_for(identity), identity)


# --- header identities of a request ---------------------------------------------------------


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


@pytest.mark.parametrize("value", [None, ""])
def test_a_missing_header_falls_back_to_the_ip(value: str | None) -> None:
    meta = {} if value is None else {"HTTP_X_API_KEY": value}
    req = request(**meta)
    identity = request_identity("header", req, header_policy().header_meta_key)
    assert identity == "ip:198.51.100.7"


# --- bounded keys whatever the header -------------------------------------------------------


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


# --- the facts a policy and an override read ------------------------------------------------


def ip_policy(name: str = "per-ip", **fields: Any) -> CompiledPolicy:
    return search_policy(name, "ip", **fields)


def by_user_key(name: str = "by-user") -> CompiledPolicy:
    """A policy that counts logged-in users only (``user_policy`` is ``user_or_ip``)."""
    return search_policy(name, "user")


def test_policy_identity_is_the_identity_of_the_policys_key_kind() -> None:
    req = request(HTTP_X_API_KEY="token-1")
    by_header = request_facts.policy_identity(req, header_policy())
    assert by_header is not None
    assert HASHED_HEADER.fullmatch(by_header)
    assert by_header == request_identity("header", req, "HTTP_X_API_KEY")
    assert request_facts.policy_identity(req, ip_policy()) == "ip:198.51.100.7"
    assert request_facts.policy_identity(req, user_policy()) == "ip:198.51.100.7"  # anonymous
    assert request_facts.policy_identity(req, by_user_key()) is None


@pytest.mark.django_db
def test_user_key_is_the_pk_of_a_logged_in_user_only(alice: User) -> None:
    req = request()
    assert request_facts.user_key(req) is None  # no auth middleware at all
    req.user = AnonymousUser()
    assert request_facts.user_key(req) is None
    req.user = alice
    assert request_facts.user_key(req) == str(alice.pk)


def test_is_exempt_reads_the_address_the_limiter_counts() -> None:
    with override_settings(RATELIMITS={"EXEMPT_NETWORKS": ["198.51.100.0/24"], "NUM_PROXIES": 0}):
        assert request_facts.is_exempt(request())
        assert not request_facts.is_exempt(request(REMOTE_ADDR="192.0.2.1"))
        # A client cannot claim an exempt address when no proxy is trusted.
        assert not request_facts.is_exempt(
            request(REMOTE_ADDR="192.0.2.1", HTTP_X_FORWARDED_FOR="198.51.100.7")
        )
    assert not request_facts.is_exempt(request())


# --- checks_for: the checks a request is decided by -----------------------------------------


def test_checks_for_gives_one_check_per_policy_with_its_identity() -> None:
    policies = [ip_policy(), header_policy()]
    req = request(HTTP_X_API_KEY="token-1")
    checks = request_facts.checks_for(req, policies)
    assert [(c.policy, c.identity, c.shard) for c in checks] == [
        (policies[0], "ip:198.51.100.7", 0),
        (policies[1], request_identity("header", req, "HTTP_X_API_KEY"), 0),
    ]
    assert request_facts.checks_for(req, []) == []


def test_checks_for_picks_a_shard_of_a_sharded_policy() -> None:
    sharded = ip_policy(shards=4)
    shards = {request_facts.checks_for(request(), [sharded])[0].shard for _ in range(200)}
    assert shards <= {0, 1, 2, 3}
    assert len(shards) > 1


def test_checks_for_an_exempt_network_is_empty() -> None:
    policies = [ip_policy(), user_policy(), header_policy()]
    with override_settings(RATELIMITS={"EXEMPT_NETWORKS": ["198.51.100.0/24"]}):
        assert request_facts.checks_for(request(HTTP_X_API_KEY="token-1"), policies) == []
        others = request_facts.checks_for(request(REMOTE_ADDR="192.0.2.1"), policies)
        assert [c.policy.name for c in others] == ["per-ip", "per-user", "api-key"]


def test_checks_for_leaves_out_a_user_policy_for_an_anonymous_request() -> None:
    policies = [by_user_key(), ip_policy()]
    anonymous = request()
    anonymous.user = AnonymousUser()
    for req in (anonymous, request()):  # logged out, and no auth middleware at all
        checks = request_facts.checks_for(req, policies)
        assert [(c.policy.name, c.identity) for c in checks] == [("per-ip", "ip:198.51.100.7")]


@pytest.mark.django_db
def test_checks_for_keeps_a_user_policy_for_a_logged_in_user(alice: User) -> None:
    req = request()
    req.user = alice
    checks = request_facts.checks_for(req, [by_user_key(), ip_policy()])
    assert [(c.policy.name, c.identity) for c in checks] == [
        ("by-user", f"u:{alice.pk}"),
        ("per-ip", "ip:198.51.100.7"),
    ]


def test_checks_for_leaves_out_a_policy_its_identity_function_leaves_out() -> None:
    policies = [ip_policy("a"), ip_policy("b")]

    def only_b(request: Any, policy: CompiledPolicy) -> str | None:
        return "global" if policy.name == "b" else None

    checks = request_facts.checks_for(request(), policies, identity_of=only_b)
    assert [(c.policy.name, c.identity) for c in checks] == [("b", "global")]


@pytest.mark.django_db
def test_checks_for_applies_the_overrides_of_the_user(alice: User) -> None:
    """An override exempting alice leaves its policy out; one giving her a limit gives a
    check under that limit. Another user gets both policies as they are."""
    exempting = make_policy("exempting", endpoint="api:search", key="user_or_ip")
    raising = make_policy("raising", endpoint="api:search", algorithm="fixed_window")
    PolicyOverride.objects.create(policy=exempting, user=alice, exempt=True)
    PolicyOverride.objects.create(policy=raising, user=alice, limit=50)
    loaded = table.load_table()
    policies = [loaded.get("exempting"), loaded.get("raising")]
    assert all(p is not None and p.overrides is not None for p in policies)

    req = request()
    req.user = alice
    (check,) = request_facts.checks_for(req, policies)
    assert (check.policy.name, check.identity) == ("raising", "ip:198.51.100.7")
    assert check.policy.limit == 50
    assert check.policy.override == "user alice"

    bob = User.objects.create_user("bob")
    req.user = bob
    checks = request_facts.checks_for(req, policies)
    assert [(c.policy.name, c.identity, c.policy.limit) for c in checks] == [
        ("exempting", f"u:{bob.pk}", 5),
        ("raising", "ip:198.51.100.7", 5),
    ]
    assert {c.policy.override for c in checks} == {""}


@pytest.mark.django_db
def test_checks_for_applies_an_override_of_the_address() -> None:
    """An anonymous client's override is found by its identity (its address)."""
    policy = make_policy("by-address", endpoint="api:search")  # 5 per 60 s per address
    PolicyOverride.objects.create(policy=policy, identity="198.51.100.0/24", limit=9)
    PolicyOverride.objects.create(policy=policy, identity="192.0.2.1", exempt=True)
    policies = [table.load_table().get("by-address")]
    (check,) = request_facts.checks_for(request(), policies)
    assert (check.identity, check.policy.limit) == ("ip:198.51.100.7", 9)
    assert request_facts.checks_for(request(REMOTE_ADDR="192.0.2.1"), policies) == []
    (other,) = request_facts.checks_for(request(REMOTE_ADDR="203.0.113.1"), policies)
    assert other.policy.limit == 5


# --- request_cost: a cost above MAX_COST -------------------------------------------------------


def test_a_cost_above_max_cost_is_said_again_each_minute_per_view(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = remind_on(monkeypatch, request_facts, "_max_cost")

    def export(request: Any) -> int:
        return 5_000

    def said() -> int:
        assert request_facts.request_cost(export, request()) is None  # refused: the policies' costs
        return sum("MAX_COST" in m for m in caplog.messages)

    with override_settings(RATELIMITS={"MAX_COST": 1000}), caplog.at_level(logging.WARNING):
        assert_said_once_a_minute(said, clock)
    assert "export" in caplog.messages[-1] and "repeated every minute" in caplog.messages[-1]
