"""``manage.py ratelimits check``: the policies a request would meet and the client's place
in each, without consuming."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings

from ratelimits.engine.keys import identity
from tests.cli.traffic import SECRET, V4, all_keys, hit, peek, refused, row_of
from tests.helpers import cells, ratelimits_settings, run, run_json

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("backend")]


def test_check_shows_the_clients_count_without_consuming(redis_client, demo_site):
    login = demo_site["login"]
    hit(login, V4, times=2)
    key = login.key_for(V4)
    before = redis_client.dump(key)
    text = run("check", "--path", "/api/login/", "--method", "post", "--ip", "203.0.113.7")
    lines = text.splitlines()
    assert lines[0] == "POST /api/login/: url name api:login, throttle_scope -"
    assert cells(lines[1]) == [
        "policy",
        "endpoint",
        "rate",
        "algorithm",
        "mode",
        "identity",
        "count",
        "remaining",
        "next",
    ]
    assert cells(lines[2]) == [
        "login",
        "api:login",
        "5 per 60 s",
        "sliding_log",
        "enforce",
        V4,
        "2",
        "3",
        "allowed",
    ]
    assert lines[3:] == ["The next request would be allowed."]
    record = run_json("check", "--path", "/api/login/", "--method", "POST", "--ip", "203.0.113.7")
    assert record == {
        "method": "POST",
        "path": "/api/login/",
        "url_name": "api:login",
        "throttle_scope": None,
        "allowed": True,
        "retry_after": None,
        "policies": [
            {
                "policy": "login",
                "identity": V4,
                "enforce": True,
                "limit": 5,
                "window": 60,
                "count": 2,
                "remaining": 3,
                "allowed": True,
                "retry_after": 0,
                "override": None,
                "exempt": False,
            }
        ],
    }
    assert redis_client.dump(key) == before
    assert peek(redis_client, login, V4).count == 2

    hit(login, V4, times=3)
    text = run("check", "--path", "/api/login/", "--method", "POST", "--ip", "203.0.113.7")
    row = row_of(text, "login")
    assert row[6:8] == ["5", "0"] and re.fullmatch(r"denied \(\d+\.\d s\)", row[8])
    assert re.search(
        r"^The next request would be denied by login; retry in \d+\.\d s\.$", text, re.M
    )
    record = run_json("check", "--path", "/api/login/", "--method", "POST", "--ip", "203.0.113.7")
    assert record["allowed"] is False and 50 < record["retry_after"] <= 60
    assert peek(redis_client, login, V4).count == 5
    # Another address has its own count; IPv6 is grouped by its /64.
    other = run_json("check", "--path", "/api/login/", "--method", "POST", "--ip", "203.0.113.70")
    assert (other["policies"][0]["count"], other["policies"][0]["remaining"]) == (0, 5)
    six = run_json("check", "--path", "/api/login/", "--method", "POST", "--ip", "2001:db8::1")
    assert six["policies"][0]["identity"] == "ip:2001:db8::/64"


def test_check_as_a_user(redis_client, demo_site):
    alice = demo_site["alice"]
    hit(demo_site["payment"], f"u:{alice.pk}", times=3)
    record = run_json("check", "--path", "/api/payment/", "--method", "POST", "--user", "alice")
    assert record["url_name"] == "api:payment"
    (payment,) = record["policies"]
    assert (payment["policy"], payment["identity"], payment["count"]) == (
        "payment",
        f"u:{alice.pk}",
        3,
    )
    assert payment["allowed"] is False and record["allowed"] is False
    assert 50 < record["retry_after"] <= 60
    hit(demo_site["search"], f"u:{alice.pk}", times=4)
    record = run_json("check", "--path", "/api/search/", "--user", "alice", "--ip", "192.0.2.9")
    assert (record["url_name"], record["throttle_scope"]) == ("api:search", "search")
    (search,) = record["policies"]
    assert (search["identity"], search["count"], search["enforce"]) == (
        f"u:{alice.pk}",
        4,
        False,
    )
    text = run("check", "--path", "/api/search/", "--user", "alice")
    assert text.splitlines()[0] == "GET /api/search/: url name api:search, throttle_scope search"
    assert row_of(text, "search")[4:8] == ["shadow", f"u:{alice.pk}", "4", "16"]


def test_check_with_a_header(redis_client, demo_site):
    api = demo_site["api"]
    hashed = identity.header_identity(identity.meta_key("X-Api-Key"), SECRET)
    hit(api, hashed, times=3)
    record = run_json("check", "--path", "/api/items/", "--header", f"X-Api-Key={SECRET}")
    (found,) = record["policies"]
    assert (found["policy"], found["identity"], found["count"], found["remaining"]) == (
        "api",
        hashed,
        3,
        7,
    )
    text = run("check", "--path", "/api/items/", "--header", f"X-Api-Key={SECRET}")
    assert SECRET not in text and row_of(text, "api")[5] == hashed
    # Without the header, the policy counts by address.
    record = run_json("check", "--path", "/api/items/", "--ip", "192.0.2.1")
    assert record["policies"][0]["identity"] == "ip:192.0.2.1"
    assert record["policies"][0]["count"] == 0


def test_check_explains_skipped_policies(redis_client, demo_site):
    record = run_json("check", "--path", "/api/payment/", "--method", "POST", "--ip", "192.0.2.1")
    assert record["policies"] == [
        {
            "policy": "payment",
            "identity": None,
            "skipped": "does not count anonymous requests (give --user)",
        }
    ]
    assert record["allowed"] is True
    text = run("check", "--path", "/api/payment/", "--method", "POST")
    row = row_of(text, "payment")
    assert row[-1] == "not counted: does not count anonymous requests (give --user)"
    assert row[5:8] == ["-", "-", "-"]
    record = run_json("check", "--path", "/api/login/", "--method", "POST")
    assert record["policies"] == [
        {"policy": "login", "identity": None, "skipped": "counts by address (give --ip)"}
    ]
    text = run("check", "--path", "/api/items/")
    assert row_of(text, "api")[-1] == "not counted: counts by address (give --ip)"
    assert all_keys(redis_client) == set()


def test_check_when_no_policy_matches(redis_client, demo_site):
    for args, first in [
        (("--path", "/nowhere/"), "GET /nowhere/: url name -, throttle_scope -"),
        (("--path", "/api/login/"), "GET /api/login/: url name api:login, throttle_scope -"),
        (("--path", "/api/payment/", "--method", "GET", "--user", "alice"), "GET /api/payment/"),
    ]:
        text = run("check", *args)
        lines = text.splitlines()
        assert lines[0].startswith(first)
        assert lines[1:] == ["No enabled policy matches this request: it is not rate limited."]
        record = run_json("check", *args)
        assert (record["policies"], record["allowed"]) == ([], True)


def test_check_refusals(demo_site):
    base = ("check", "--path", "/api/login/", "--method", "POST")
    assert refused(*base, "--ip", "garbage") == "--ip 'garbage' is not an IP address."
    assert refused(*base, "--ip", "10.0.0.0/8") == "--ip '10.0.0.0/8' is not an IP address."
    assert refused("check", "--path", "api/login/") == "--path 'api/login/' must start with /."
    assert refused(*base, "--user", "nobody") == "--user: there is no user 'nobody'."
    message = "--header must be NAME=VALUE, e.g. --header X-Api-Key=abc123."
    assert refused(*base, "--header", "X-Api-Key") == message
    assert refused(*base, "--header", "X-Api-Key=") == message
    assert refused(*base, "--header", "=abc") == message
    assert "--path" in refused("check", "--ip", "192.0.2.1")


@pytest.mark.parametrize(
    ("value", "note"),
    [("off", '"off": no policy is decided'), ("shadow", '"shadow": every policy counts')],
)
def test_check_says_the_mode_when_it_is_not_enforce(demo_site, value, note):
    ask = ("check", "--path", "/api/login/", "--method", "post", "--ip", "203.0.113.7")
    assert "MODE" not in run(*ask)
    with override_settings(RATELIMITS=ratelimits_settings(MODE=value)):
        last = run(*ask).splitlines()[-1]
    assert last.startswith('RATELIMITS["MODE"] is ') and note in last
