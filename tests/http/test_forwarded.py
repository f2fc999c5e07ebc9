"""Forwarding headers and whom to believe (``ratelimits.http.forwarded``,
``ratelimits.http.proxies``): each hop's address in every form proxies write, the walk
from the right behind ``TRUSTED_PROXIES``, ``NUM_PROXIES`` as before, and the notice of a
proxy nobody trusted. End to end against a served site: tests/security/
test_forged_addresses.py."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ratelimits.engine.keys.exemptions import is_exempt_address
from ratelimits.http import forwarded, nat64, proxies
from ratelimits.http.forwarded import (
    MAX_HOPS,
    forwarded_for,
    forwarded_hops,
    parse_node,
    walk,
    x_forwarded_for,
    x_forwarded_for_hops,
)
from ratelimits.http.request_facts import client_ip
from tests.helpers import assert_said_once_a_minute, ratelimits_settings, remind_on

PROXY = "10.0.0.2"
CLIENT = "198.51.100.7"

# --- one hop's address -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("203.0.113.7", "203.0.113.7"),
        (" 203.0.113.7 ", "203.0.113.7"),
        ("203.0.113.7:4711", "203.0.113.7"),
        ("203.0.113.7:_abc", "203.0.113.7"),  # RFC 7239 obfuscated port
        ("2001:db8::1", "2001:db8::1"),
        ("2001:DB8::1", "2001:db8::1"),
        ("[2001:db8::1]", "2001:db8::1"),
        ("[2001:db8::1]:4711", "2001:db8::1"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("[::ffff:192.0.2.1]:80", "192.0.2.1"),
        ("fe80::1%eth0", "fe80::1"),
        ("[fe80::1%eth0]:443", "fe80::1"),
    ],
)
def test_a_hop_names_its_address_in_every_form(text: str, expected: str) -> None:
    assert str(parse_node(text)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "unknown",
        "_hidden",
        "_SEVKISEK",
        "999.1.1.1",
        "1.2.3",
        "010.0.0.1",
        "203.0.113.7:",
        "203.0.113.7:port",
        "203.0.113.7:123456",
        "[203.0.113.7]",  # brackets hold IPv6 only
        "[2001:db8::1",
        "[2001:db8::1]x",
        "[2001:db8::1]:",
        "2001:db8::1:4711x",
        "1.2.3.4/24",
        "example.com",
        "fe80::1%" + "x" * 500,
        '"203.0.113.7"',  # quotes belong to Forwarded, which takes them off
    ],
)
def test_anything_else_names_no_address(text: str) -> None:
    assert parse_node(text) is None


def test_x_forwarded_for_lists_each_hop_and_skips_empty_entries() -> None:
    hops = x_forwarded_for("203.0.113.7, ,garbage,[2001:db8::1]:4711,10.0.0.1:80,")
    assert [str(hop) if hop else None for hop in hops] == [
        "203.0.113.7",
        None,
        "2001:db8::1",
        "10.0.0.1",
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("for=192.0.2.60;proto=http;by=203.0.113.43", ["192.0.2.60"]),
        ('for="[2001:db8:cafe::17]:4711"', ["2001:db8:cafe::17"]),
        ('For="_gazonk"', [None]),
        ("for=unknown", [None]),
        ("for=192.0.2.43, for=198.51.100.17", ["192.0.2.43", "198.51.100.17"]),
        (
            "for=192.0.2.43,for=198.51.100.17;by=203.0.113.60;proto=http",
            ["192.0.2.43", "198.51.100.17"],
        ),
        ('for="192.0.2.43:47011"', ["192.0.2.43"]),
        ("for=192.0.2.43:47011", ["192.0.2.43"]),  # unquoted port: not RFC 7239, read anyway
        ("FOR = 192.0.2.43", ["192.0.2.43"]),
        ("proto=https;by=203.0.113.43", [None]),  # no for: the hop is unknown
        ("for=192.0.2.1;for=192.0.2.2", [None]),  # two for= in one element
        ("for", [None]),
        ('for="192.0.2.1', [None]),  # an unclosed quote
        ('for="a,b;c", for=192.0.2.1', [None, "192.0.2.1"]),  # separators inside quotes
        ('for="\\"[2001:db8::1]\\""', [None]),
        ('for="[2001:db8::\\1]"', ["2001:db8::1"]),  # a quoted pair is the character
        ("for=192.0.2.1,, ,for=192.0.2.2", ["192.0.2.1", "192.0.2.2"]),  # empty elements
        ("", []),
        # Read from the right: a quote left open swallows only what lies to its left.
        ('for=", for=198.51.100.9', [None, "198.51.100.9"]),
        ('for="[2001:db8::1]:4711", for="', [None]),
        ('for=192.0.2.1, for="x\\\\", for="192.0.2.2"', ["192.0.2.1", None, "192.0.2.2"]),
        ('for=192.0.2.1;by="a\\", b", for=192.0.2.2', ["192.0.2.1", "192.0.2.2"]),
    ],
)
def test_forwarded_gives_each_elements_for(value: str, expected: list[str | None]) -> None:
    assert [str(hop) if hop else None for hop in forwarded_for(value)] == expected


@pytest.mark.parametrize(
    "client_text",
    ['for="', 'for="\\', "for=\\", 'for="a\\"', '"', '";,', "for=", ",,;;", 'x="a, b'],
)
def test_what_a_client_wrote_never_hides_what_the_proxy_appended(client_text: str) -> None:
    appended = f'{client_text}, for="[2001:db8::7]:4711";proto=https, for=198.51.100.9'
    hops = forwarded_hops(appended)
    assert str(next(hops)) == "198.51.100.9"
    assert str(next(hops)) == "2001:db8::7"
    assert str(next(x_forwarded_for_hops(f"{client_text}, 198.51.100.9"))) == "198.51.100.9"


def test_hops_are_read_from_the_right_only_as_far_as_asked() -> None:
    """An 8 KB header of distinct entries: reading its last hop parses that hop alone."""
    garbage = ", ".join(f"{i:x}.{i}.{i % 256}.1" for i in range(900))
    assert len(garbage) > 8192
    for hops in (
        x_forwarded_for_hops(garbage + ", 198.51.100.9"),
        forwarded_hops(", ".join(f'for="{g}"' for g in garbage.split(", ")) + ", for=198.51.100.9"),
    ):
        forwarded._parse_node.cache_clear()
        assert str(next(hops)) == "198.51.100.9"
        assert forwarded._parse_node.cache_info().currsize == 1


# --- the walk ----------------------------------------------------------------------------------


def addresses(*texts: str | None) -> list[Any]:
    """The hops ``texts`` (written left to right, as in a header) in the order a walk
    reads them: from the right."""
    return [None if t is None else ipaddress.ip_address(t) for t in reversed(texts)]


def in_ten(address: Any) -> bool:
    return address in ipaddress.ip_network("10.0.0.0/8")


@pytest.mark.parametrize(
    ("hops", "expected"),
    [
        (["6.6.6.6", CLIENT], CLIENT),  # the first untrusted from the right
        (["6.6.6.6", CLIENT, "10.0.0.3", "10.0.0.4"], CLIENT),
        (["10.0.0.5", "10.0.0.3"], "10.0.0.5"),  # all trusted: the leftmost
        (["6.6.6.6", None, "10.0.0.3"], None),  # a bad hop behind trusted ones: unknown
        (["6.6.6.6", None], None),  # the rightmost is bad: unknown, never the sender
        ([None, CLIENT], CLIENT),  # garbage left of the client is never read
        ([], None),
        (["10.0.0.1"] * MAX_HOPS, "10.0.0.1"),
        (["10.0.0.1"] * (MAX_HOPS + 1), None),  # more trusted hops than any chain: unknown
        ([CLIENT] + ["10.0.0.1"] * (MAX_HOPS - 1), CLIENT),
    ],
)
def test_walk_from_the_right_while_trusted(hops: list[str | None], expected: str | None) -> None:
    found = walk(addresses(*hops), in_ten)
    assert (None if found is None else str(found)) == expected


# --- client_ip behind TRUSTED_PROXIES ----------------------------------------------------------

TRUSTED = ratelimits_settings(TRUSTED_PROXIES=["10.0.0.0/8", "2001:db8:ffff::/48"])


def meta(remote: str = PROXY, **headers: str) -> dict[str, Any]:
    return {"REMOTE_ADDR": remote, **headers}


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, PROXY),  # a request from the proxy itself (a health check)
        ({"HTTP_X_FORWARDED_FOR": CLIENT}, CLIENT),
        ({"HTTP_X_FORWARDED_FOR": f"6.6.6.6, {CLIENT}"}, CLIENT),
        ({"HTTP_X_FORWARDED_FOR": f"6.6.6.6, {CLIENT}, 10.0.0.9"}, CLIENT),
        ({"HTTP_X_FORWARDED_FOR": f"{CLIENT}:51234"}, CLIENT),
        ({"HTTP_X_FORWARDED_FOR": "[2001:db8:1::9]:51234"}, "2001:db8:1::9"),
        ({"HTTP_X_FORWARDED_FOR": "10.0.0.7, 10.0.0.8"}, "10.0.0.7"),
        # Unreadable from a trusted sender: unknown, never the proxy's own address.
        ({"HTTP_X_FORWARDED_FOR": "garbage"}, ""),
        ({"HTTP_X_FORWARDED_FOR": f"{CLIENT}, garbage, 10.0.0.8"}, ""),
        ({"HTTP_X_FORWARDED_FOR": " , "}, ""),
        ({"HTTP_FORWARDED": f"for={CLIENT};proto=https"}, CLIENT),
        ({"HTTP_FORWARDED": f'for=6.6.6.6, for="{CLIENT}:80"'}, CLIENT),
        ({"HTTP_FORWARDED": 'for="[2001:db8:1::9]:4711"'}, "2001:db8:1::9"),
        ({"HTTP_FORWARDED": 'for="[2001:db8:ffff::1]", for=10.0.0.9'}, "2001:db8:ffff::1"),
        ({"HTTP_FORWARDED": "for=unknown"}, ""),
        ({"HTTP_FORWARDED": f"for={CLIENT}, for=_hidden"}, ""),
        ({"HTTP_FORWARDED": f"for=6.6.6.6, for={CLIENT}, for=_hidden"}, ""),
        ({"HTTP_FORWARDED": 'for="'}, ""),
        ({"HTTP_FORWARDED": f'for=", for={CLIENT}'}, CLIENT),  # the red team's quote
        ({"HTTP_FORWARDED": f'for="6.6.6.6, for={CLIENT}'}, CLIENT),
        # Both headers: one client when they agree, unknown when they do not.
        ({"HTTP_X_FORWARDED_FOR": CLIENT, "HTTP_FORWARDED": f"for={CLIENT}"}, CLIENT),
        ({"HTTP_X_FORWARDED_FOR": CLIENT, "HTTP_FORWARDED": "for=6.6.6.6"}, ""),
        ({"HTTP_X_FORWARDED_FOR": "6.6.6.6", "HTTP_FORWARDED": f"for={CLIENT}"}, ""),
        ({"HTTP_X_FORWARDED_FOR": CLIENT, "HTTP_FORWARDED": "for=unknown"}, ""),
    ],
)
def test_behind_trusted_proxies_the_headers_are_walked(
    headers: dict[str, str], expected: str
) -> None:
    with override_settings(RATELIMITS=TRUSTED):
        assert client_ip(meta(**headers)) == expected


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_X_FORWARDED_FOR": "203.0.113.9"},
        {"HTTP_X_FORWARDED_FOR": "10.0.0.1"},
        {"HTTP_FORWARDED": "for=203.0.113.9"},
        {"HTTP_FORWARDED": 'for="[2001:db8:ffff::1]"'},
        {"HTTP_X_FORWARDED_FOR": "garbage", "HTTP_FORWARDED": "for=unknown"},
    ],
)
@pytest.mark.parametrize("num_proxies", [0, 1, 2])
def test_an_untrusted_sender_changes_nothing(headers: dict[str, str], num_proxies: int) -> None:
    """From an untrusted ``REMOTE_ADDR`` the headers are not read, whatever NUM_PROXIES says
    (TRUSTED_PROXIES governs), so neither the identity nor an exemption moves."""
    settings_ = {**TRUSTED, "NUM_PROXIES": num_proxies, "EXEMPT_NETWORKS": ["10.0.0.0/8"]}
    with override_settings(RATELIMITS=settings_):
        address = client_ip(meta(CLIENT, **headers))
        assert address == CLIENT
        assert not is_exempt_address(address)


def test_an_ipv4_mapped_sender_is_trusted_as_its_ipv4_address() -> None:
    with override_settings(RATELIMITS=TRUSTED):
        assert client_ip(meta("::ffff:10.0.0.2", HTTP_X_FORWARDED_FOR=CLIENT)) == CLIENT
    mapped = ratelimits_settings(TRUSTED_PROXIES=["::ffff:10.0.0.0/104"])
    with override_settings(RATELIMITS=mapped):
        assert client_ip(meta(HTTP_X_FORWARDED_FOR=CLIENT)) == CLIENT


def test_trusted_proxies_are_read_again_when_the_setting_changes() -> None:
    with override_settings(RATELIMITS=ratelimits_settings(TRUSTED_PROXIES=["10.0.0.0/8"])):
        assert client_ip(meta(HTTP_X_FORWARDED_FOR=CLIENT)) == CLIENT
    with override_settings(RATELIMITS=ratelimits_settings(TRUSTED_PROXIES=["192.0.2.0/24"])):
        assert client_ip(meta(HTTP_X_FORWARDED_FOR=CLIENT)) == PROXY
        assert client_ip(meta("192.0.2.9", HTTP_X_FORWARDED_FOR=CLIENT)) == CLIENT


def test_entries_that_do_not_parse_are_left_out() -> None:
    broken = ratelimits_settings(TRUSTED_PROXIES=["10.0.0.300/8", 10, "10.0.0.0/8"])
    with override_settings(RATELIMITS=broken):
        assert proxies.trusted_networks() == (ipaddress.ip_network("10.0.0.0/8"),)
        assert client_ip(meta(HTTP_X_FORWARDED_FOR=CLIENT)) == CLIENT


# --- NUM_PROXIES, as before, with ports --------------------------------------------------------


@pytest.mark.parametrize(
    ("forwarded", "expected"),
    [
        ("203.0.113.9:4711", "203.0.113.9"),
        ("6.6.6.6, [2001:db8::9]:4711", "2001:db8::9"),
        ("6.6.6.6, 203.0.113.9:_obf", "203.0.113.9"),
        ("6.6.6.6, 203.0.113.9:", CLIENT),
    ],
)
def test_num_proxies_reads_entries_with_ports(forwarded: str, expected: str) -> None:
    with override_settings(RATELIMITS=ratelimits_settings(NUM_PROXIES=1)):
        assert client_ip(meta(CLIENT, HTTP_X_FORWARDED_FOR=forwarded)) == expected


def test_num_proxies_never_reads_forwarded() -> None:
    with override_settings(RATELIMITS=ratelimits_settings(NUM_PROXIES=1)):
        assert client_ip(meta(CLIENT, HTTP_FORWARDED="for=203.0.113.9")) == CLIENT


# --- any header: an address or the sender, never the attacker's text ---------------------------

any_header = st.text(
    st.sampled_from(list('0123456789abcdef.:[]",; =_%forFOR')) | st.characters(), max_size=120
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(xff=any_header, forwarded=any_header)
def test_any_header_gives_an_address_or_nothing(xff: str, forwarded: str) -> None:
    with override_settings(RATELIMITS=TRUSTED):
        for headers in (
            {"HTTP_X_FORWARDED_FOR": xff},
            {"HTTP_FORWARDED": forwarded},
            {"HTTP_X_FORWARDED_FOR": xff, "HTTP_FORWARDED": forwarded},
        ):
            address = client_ip(meta(**headers))
            if address:
                assert str(ipaddress.ip_address(address)) == address  # canonical
                assert "%" not in address


@settings(max_examples=200, deadline=None)
@given(
    client=st.ip_addresses(),
    port=st.none() | st.integers(0, 65535),
    junk=st.lists(st.ip_addresses().map(str), max_size=3),
)
def test_any_address_a_trusted_proxy_appends_is_the_client(
    client: Any, port: int | None, junk: list[str]
) -> None:
    """Whatever a client writes to the left, the address the proxy appended (with or
    without a port) is the client, unless it is itself trusted."""
    if isinstance(client, ipaddress.IPv6Address) and client.ipv4_mapped is not None:
        client = client.ipv4_mapped
    shown = str(client)
    if port is not None:
        shown = f"[{shown}]:{port}" if client.version == 6 else f"{shown}:{port}"
    client = nat64.unwrapped(client)  # in the default 64:ff9b::/96: its embedded IPv4
    with override_settings(RATELIMITS=TRUSTED):
        expected = str(client) if not proxies.is_trusted(client) else None
        xff = ", ".join([*junk, shown])
        found = client_ip(meta(HTTP_X_FORWARDED_FOR=xff))
        quoted = f'for="{shown}"' if ":" in shown else f"for={shown}"
        by_forwarded = client_ip(
            meta(HTTP_FORWARDED=", ".join([*(f'for="{j}"' for j in junk), quoted]))
        )
    if expected is not None:
        assert found == expected
        assert by_forwarded == expected


# --- a proxy nobody trusted --------------------------------------------------------------------


def requests_from(remote: str, count: int, **headers: str) -> None:
    for _ in range(count):
        client_ip(meta(remote, **headers))


def notices(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "no proxy is trusted" in r.getMessage()]


def test_most_requests_from_a_private_proxy_log_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with override_settings(RATELIMITS=ratelimits_settings()), caplog.at_level(logging.WARNING):
        requests_from("10.0.0.2", proxies.NOTICE_SAMPLE, HTTP_X_FORWARDED_FOR=CLIENT)
        requests_from("10.0.0.2", proxies.NOTICE_SAMPLE, HTTP_X_FORWARDED_FOR=CLIENT)
    (message,) = notices(caplog)
    assert f"{proxies.NOTICE_SAMPLE} of {proxies.NOTICE_SAMPLE} requests in a row" in message
    assert "TRUSTED_PROXIES" in message


@pytest.mark.parametrize(
    ("remote", "headers", "share"),
    [
        ("10.0.0.2", {}, 1.0),  # private, but no forwarding header: a private site
        ("93.184.216.34", {"HTTP_X_FORWARDED_FOR": CLIENT}, 1.0),  # public senders
        ("127.0.0.1", {"HTTP_FORWARDED": f"for={CLIENT}"}, 0.4),  # a minority
    ],
)
def test_no_warning_unless_most_requests_come_through_a_private_proxy(
    caplog: pytest.LogCaptureFixture, remote: str, headers: dict[str, str], share: float
) -> None:
    with override_settings(RATELIMITS=ratelimits_settings()), caplog.at_level(logging.WARNING):
        proxied = int(proxies.NOTICE_SAMPLE * share)
        requests_from(remote, proxied, **headers)
        requests_from("93.184.216.34", proxies.NOTICE_SAMPLE - proxied + 50)
    assert notices(caplog) == []


def test_no_notice_once_a_proxy_is_trusted(caplog: pytest.LogCaptureFixture) -> None:
    for configured in ({"NUM_PROXIES": 1}, {"TRUSTED_PROXIES": ["10.0.0.0/8"]}):
        with (
            override_settings(RATELIMITS=ratelimits_settings(**configured)),
            caplog.at_level(logging.WARNING),
        ):
            requests_from("10.0.0.2", proxies.NOTICE_SAMPLE + 1, HTTP_X_FORWARDED_FOR=CLIENT)
    assert notices(caplog) == []


@pytest.mark.parametrize(
    ("named", "headers", "expected"),
    [
        # The proxies write X-Forwarded-For: a client's Forwarded is no second counter.
        (
            "X-Forwarded-For",
            {"HTTP_X_FORWARDED_FOR": CLIENT, "HTTP_FORWARDED": "for=6.6.6.6"},
            CLIENT,
        ),
        ("x-forwarded-for", {"HTTP_X_FORWARDED_FOR": CLIENT, "HTTP_FORWARDED": 'for="'}, CLIENT),
        ("X-Forwarded-For", {"HTTP_FORWARDED": f"for={CLIENT}"}, PROXY),  # not read at all
        (
            "Forwarded",
            {"HTTP_X_FORWARDED_FOR": "6.6.6.6", "HTTP_FORWARDED": f"for={CLIENT}"},
            CLIENT,
        ),
        (
            " FORWARDED ",
            {"HTTP_X_FORWARDED_FOR": "garbage", "HTTP_FORWARDED": f"for={CLIENT}"},
            CLIENT,
        ),
        ("Forwarded", {"HTTP_X_FORWARDED_FOR": CLIENT}, PROXY),
        # Unset (or not a header's name: check E002), both are read.
        (None, {"HTTP_X_FORWARDED_FOR": CLIENT, "HTTP_FORWARDED": "for=6.6.6.6"}, ""),
        ("X-Real-IP", {"HTTP_X_FORWARDED_FOR": CLIENT, "HTTP_FORWARDED": "for=6.6.6.6"}, ""),
    ],
)
def test_forwarded_header_names_the_one_header_read(
    named: str | None, headers: dict[str, str], expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        override_settings(RATELIMITS={**TRUSTED, "FORWARDED_HEADER": named}),
        caplog.at_level(logging.WARNING),
    ):
        assert client_ip(meta(**headers)) == expected
    assert any("same client" in m for m in caplog.messages) == (expected == "")


def test_disagreeing_headers_log_once(caplog: pytest.LogCaptureFixture) -> None:
    with override_settings(RATELIMITS=TRUSTED), caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert client_ip(meta(HTTP_X_FORWARDED_FOR=CLIENT, HTTP_FORWARDED="for=6.6.6.6")) == ""
    (message,) = [r.getMessage() for r in caplog.records if "same client" in r.getMessage()]
    assert "FORWARDED_HEADER" in message


def test_disagreeing_headers_are_said_again_each_minute(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = remind_on(monkeypatch, proxies, "_reminders")

    def said() -> int:
        client_ip(meta(HTTP_X_FORWARDED_FOR=CLIENT, HTTP_FORWARDED="for=6.6.6.6"))
        return sum("do not name the same client" in m for m in caplog.messages)

    with override_settings(RATELIMITS=TRUSTED), caplog.at_level(logging.WARNING):
        assert_said_once_a_minute(said, clock)
    assert "Repeated every minute" in caplog.messages[-1]


def test_a_proxy_nobody_trusts_is_said_again_each_minute_while_most_requests_come_through_it(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = remind_on(monkeypatch, proxies, "_reminders")
    with override_settings(RATELIMITS=ratelimits_settings()), caplog.at_level(logging.WARNING):
        requests_from("10.0.0.2", 3 * proxies.NOTICE_SAMPLE, HTTP_X_FORWARDED_FOR=CLIENT)
        assert len(notices(caplog)) == 1
        clock.now += 60
        requests_from("10.0.0.2", proxies.NOTICE_SAMPLE, HTTP_X_FORWARDED_FOR=CLIENT)
        assert len(notices(caplog)) == 2
        # A sample where most requests are direct ends the looking, as at the start.
        requests_from("93.184.216.34", proxies.NOTICE_SAMPLE)
        clock.now += 60
        requests_from("10.0.0.2", proxies.NOTICE_SAMPLE, HTTP_X_FORWARDED_FOR=CLIENT)
    assert len(notices(caplog)) == 2
    assert "Repeated every minute" in notices(caplog)[-1]
