"""The system checks of client addresses: a ``TRUSTED_PROXIES`` entry that does not parse
(E002), one that trusts more than meant (W010), exempt networks a client can claim through
``NUM_PROXIES`` (W011), ``NUM_PROXIES`` ignored beside ``TRUSTED_PROXIES`` (W012), a
``FORWARDED_HEADER`` or ``NAT64_PREFIXES`` value that is not one (E002) and
``FORWARDED_HEADER`` without ``TRUSTED_PROXIES`` (W013)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import ERROR, WARNING, CheckMessage, run_checks
from django.test import override_settings

from tests.helpers import ratelimits_settings

ADDRESS_IDS = (
    "ratelimits.E002",
    "ratelimits.W010",
    "ratelimits.W011",
    "ratelimits.W012",
    "ratelimits.W013",
)


def messages(**values: Any) -> list[CheckMessage]:
    with override_settings(RATELIMITS=ratelimits_settings(**values)):
        found = [m for m in run_checks() if m.id in ADDRESS_IDS]
    for message in found:
        assert message.hint, f"{message.id} has no hint"
    return found


@pytest.mark.parametrize(
    "value",
    [
        "10.0.0.0/8",  # a string, not a list
        ["10.0.0.0/8", "10.0.0.300"],
        ["proxy.internal"],
        [10],
        ["2001:db8::/129"],
    ],
)
def test_an_entry_that_does_not_parse_is_e002(value: Any) -> None:
    (message,) = messages(TRUSTED_PROXIES=value)
    assert (message.id, message.level) == ("ratelimits.E002", ERROR)
    assert "TRUSTED_PROXIES" in message.msg


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("0.0.0.0/0", "trusts every address"),
        ("::/0", "trusts every address"),
        ("10.0.0.1/8", "host bits set: it trusts all of 10.0.0.0/8"),
    ],
)
def test_an_entry_that_trusts_more_than_meant_is_w010(entry: str, said: str) -> None:
    (message,) = messages(TRUSTED_PROXIES=["127.0.0.1", entry])
    assert (message.id, message.level) == ("ratelimits.W010", WARNING)
    assert said in message.msg and repr(entry) in message.msg


@pytest.mark.parametrize(
    "trusted", [[], ["127.0.0.1"], ["10.0.0.0/8", "2001:db8::/32", "::ffff:10.0.0.0/104"]]
)
def test_good_entries_pass(trusted: list[str]) -> None:
    assert messages(TRUSTED_PROXIES=trusted, EXEMPT_NETWORKS=["192.0.2.0/24"]) == []


def test_exempt_networks_behind_num_proxies_alone_is_w011() -> None:
    (message,) = messages(NUM_PROXIES=1, EXEMPT_NETWORKS=["10.0.0.0/8"])
    assert (message.id, message.level) == ("ratelimits.W011", WARNING)
    assert "TRUSTED_PROXIES" in message.hint
    assert messages(NUM_PROXIES=1) == []  # nothing to claim
    assert messages(EXEMPT_NETWORKS=["10.0.0.0/8"]) == []  # no header believed


def test_num_proxies_beside_trusted_proxies_is_w012() -> None:
    found = messages(NUM_PROXIES=2, TRUSTED_PROXIES=["10.0.0.0/8"], EXEMPT_NETWORKS=["10.0.0.0/8"])
    assert [m.id for m in found] == ["ratelimits.W012"]
    assert "NUM_PROXIES is ignored" in found[0].msg


@pytest.mark.parametrize(
    "header", [None, "X-Forwarded-For", "Forwarded", "forwarded", " FORWARDED "]
)
def test_forwarded_header_names_one_of_the_two_headers(header: str | None) -> None:
    assert messages(TRUSTED_PROXIES=["10.0.0.0/8"], FORWARDED_HEADER=header) == []


@pytest.mark.parametrize("header", ["X-Real-IP", "", "both", ["Forwarded"], 1])
def test_any_other_forwarded_header_is_e002(header: Any) -> None:
    (message,) = messages(TRUSTED_PROXIES=["10.0.0.0/8"], FORWARDED_HEADER=header)
    assert (message.id, message.level) == ("ratelimits.E002", ERROR)
    assert "FORWARDED_HEADER must be 'X-Forwarded-For' or 'Forwarded'" in message.msg
    assert repr(header) in message.msg


def test_forwarded_header_without_trusted_proxies_is_w013() -> None:
    for configured in ({}, {"NUM_PROXIES": 1}):
        (message,) = messages(FORWARDED_HEADER="Forwarded", **configured)
        assert (message.id, message.level) == ("ratelimits.W013", WARNING)
        assert "ignored" in message.msg and "TRUSTED_PROXIES" in message.hint


@pytest.mark.parametrize(
    "prefixes", [[], ["64:ff9b::/96"], ["64:ff9b::/96", "64:ff9b:1::/48", "2001:db8::/32"]]
)
def test_nat64_prefixes_of_rfc_6052_lengths_pass(prefixes: list[str]) -> None:
    assert messages(NAT64_PREFIXES=prefixes) == []


@pytest.mark.parametrize(
    ("prefixes", "said"),
    [
        ("64:ff9b::/96", "must be a list"),
        (["64:ff9b::/80"], "is a /80; a NAT64 prefix is one of /32, /40, /48, /56, /64, /96"),
        (["10.0.0.0/8"], "is not an IPv6 network"),
        ([96], "is not a string"),
    ],
)
def test_a_nat64_prefix_that_is_not_one_is_e002(prefixes: Any, said: str) -> None:
    (message,) = messages(NAT64_PREFIXES=prefixes)
    assert (message.id, message.level) == ("ratelimits.E002", ERROR)
    assert "NAT64_PREFIXES" in message.msg and said in message.msg
