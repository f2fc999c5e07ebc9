"""NAT64/SIIT client addresses (``ratelimits.http.nat64``): the IPv4 address embedded in an
IPv6 one under each RFC 6052 prefix length, and a request's client read as it, with or
without proxies. End to end against a served site: tests/security/
test_forwarding_headers.py."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from django.test import RequestFactory, override_settings

from ratelimits.http import nat64
from ratelimits.http.request_facts import client_ip, is_exempt, request_identity
from tests.helpers import ratelimits_settings

# RFC 6052 section 2.4: 192.0.2.33 embedded under 2001:db8:122:344::/n.
RFC_EXAMPLES = [
    ("2001:db8::/32", "2001:db8:c000:221::"),
    ("2001:db8:100::/40", "2001:db8:1c0:2:21::"),
    ("2001:db8:122::/48", "2001:db8:122:c000:2:2100::"),
    ("2001:db8:122:300::/56", "2001:db8:122:3c0:0:221::"),
    ("2001:db8:122:344::/64", "2001:db8:122:344:c0:2:2100:0"),
    ("2001:db8:122:344::/96", "2001:db8:122:344::192.0.2.33"),
    ("64:ff9b::/96", "64:ff9b::192.0.2.33"),
]


@pytest.mark.parametrize(("prefix", "address"), RFC_EXAMPLES)
def test_the_embedded_ipv4_address_under_each_prefix_length(prefix: str, address: str) -> None:
    network = ipaddress.IPv6Network(prefix)
    embedded = nat64.embedded_ipv4(ipaddress.IPv6Address(address), network.prefixlen)
    assert str(embedded) == "192.0.2.33"


@pytest.mark.parametrize(("prefix", "address"), RFC_EXAMPLES)
def test_a_configured_prefix_is_read_as_the_ipv4_client(prefix: str, address: str) -> None:
    with override_settings(RATELIMITS=ratelimits_settings(NAT64_PREFIXES=[prefix])):
        assert client_ip({"REMOTE_ADDR": address}) == "192.0.2.33"


def test_the_well_known_prefix_is_read_by_default() -> None:
    with override_settings(RATELIMITS=ratelimits_settings()):
        assert nat64.prefixes() == (ipaddress.IPv6Network("64:ff9b::/96"),)
        assert client_ip({"REMOTE_ADDR": "64:ff9b::c633:6407"}) == "198.51.100.7"
        # Outside the prefix, an IPv6 client stays as it came.
        assert client_ip({"REMOTE_ADDR": "64:ff9c::c633:6407"}) == "64:ff9c::c633:6407"
        assert client_ip({"REMOTE_ADDR": "2001:DB8::1"}) == "2001:DB8::1"


def test_no_prefix_leaves_every_address_as_it_came() -> None:
    with override_settings(RATELIMITS=ratelimits_settings(NAT64_PREFIXES=[])):
        assert client_ip({"REMOTE_ADDR": "64:ff9b::c633:6407"}) == "64:ff9b::c633:6407"


def request(remote: str, **headers: str) -> Any:
    return RequestFactory().get("/", REMOTE_ADDR=remote, **headers)


def test_two_ipv4_clients_behind_a_translator_count_apart() -> None:
    """Before, both were ``ip:64:ff9b::/64``: every IPv4 client of the site, one counter."""
    with override_settings(RATELIMITS=ratelimits_settings()):
        first = request_identity("ip", request("64:ff9b::198.51.100.7"))
        second = request_identity("ip", request("64:ff9b::203.0.113.9"))
    assert (first, second) == ("ip:198.51.100.7", "ip:203.0.113.9")


def test_a_local_prefix_and_the_well_known_one_together() -> None:
    both = ratelimits_settings(NAT64_PREFIXES=["64:ff9b::/96", "2001:db8:64::/48"])
    with override_settings(RATELIMITS=both):
        assert client_ip({"REMOTE_ADDR": "2001:db8:64:c633:64:700::"}) == "198.51.100.7"
        assert client_ip({"REMOTE_ADDR": "64:ff9b::203.0.113.9"}) == "203.0.113.9"


def test_behind_trusted_proxies_a_hop_in_the_prefix_is_its_ipv4_client() -> None:
    trusted = ratelimits_settings(TRUSTED_PROXIES=["10.0.0.0/8"], EXEMPT_NETWORKS=["10.0.0.0/8"])
    with override_settings(RATELIMITS=trusted):
        assert client_ip(
            {"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "64:ff9b::198.51.100.7"}
        ) == ("198.51.100.7")
        assert client_ip(
            {"REMOTE_ADDR": "10.0.0.1", "HTTP_FORWARDED": 'for="[64:ff9b::c633:6407]:4711"'}
        ) == ("198.51.100.7")
        # The embedded address is the one an exemption and the walk's trust look at.
        translated_monitor = request("64:ff9b::10.0.0.9")
        assert client_ip(translated_monitor.META) == "10.0.0.9"
        assert is_exempt(translated_monitor)


def test_num_proxies_reads_a_hop_in_the_prefix_as_its_ipv4_client() -> None:
    with override_settings(RATELIMITS=ratelimits_settings(NUM_PROXIES=1)):
        meta = {"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "64:ff9b::198.51.100.7"}
        assert client_ip(meta) == "198.51.100.7"


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("64:ff9b::/80", "a /80"),
        ("10.0.0.0/8", "not an IPv6 network"),
        ("nonsense", "not an IPv6 network"),
        (96, "not a string"),
    ],
)
def test_a_prefix_that_is_not_one_says_why(entry: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        nat64.parse_prefix(entry)


def test_entries_that_do_not_parse_are_left_out() -> None:
    broken = ratelimits_settings(NAT64_PREFIXES=["64:ff9b::/80", 7, "2001:db8:64::/96"])
    with override_settings(RATELIMITS=broken):
        assert nat64.prefixes() == (ipaddress.IPv6Network("2001:db8:64::/96"),)
