"""A policy's own IPv6 prefix (``Policy.ipv6_prefix``; blank: ``IPV6_PREFIX``): the identity
it counts a client as, through the compiled policy, the request facts, overrides, the
command's ``--identity``, the admin and policy files. Served end to end:
tests/security/test_forged_addresses.py."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, RequestFactory, override_settings

from ratelimits.engine.keys.identity import ip_identity
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.table import current as table
from ratelimits.http import request_facts
from ratelimits.models import Policy, PolicyOverride
from ratelimits.tools.identities import identity_from_text
from ratelimits.tools.policy_files import (
    PolicyFileError,
    dump_policies,
    parse_document,
    plan_import,
)
from tests.helpers import make_policy, ratelimits_settings, search_policy

CLIENT = "2001:db8:5:1:aaaa::9"


def test_ip_identity_groups_by_the_prefix_given_else_the_setting() -> None:
    assert ip_identity(CLIENT, 48) == "ip:2001:db8:5::/48"
    assert ip_identity(CLIENT, 128) == f"ip:{CLIENT}"
    assert ip_identity(CLIENT) == "ip:2001:db8:5:1::/64"
    with override_settings(RATELIMITS=ratelimits_settings(IPV6_PREFIX=56)):
        assert ip_identity(CLIENT) == "ip:2001:db8:5::/56"
        assert ip_identity(CLIENT, 64) == "ip:2001:db8:5:1::/64"
    assert ip_identity("203.0.113.7", 48) == "ip:203.0.113.7"  # IPv4 is never grouped
    assert ip_identity("::ffff:203.0.113.7", 48) == "ip:203.0.113.7"


@pytest.mark.parametrize("prefix", [-1, 129])
def test_build_refuses_a_prefix_outside_0_to_128(prefix: int) -> None:
    with pytest.raises(ValueError, match="ipv6_prefix must be from 0 to 128"):
        search_policy("p", "ip", ipv6_prefix=prefix)


@pytest.mark.django_db
def test_from_model_carries_the_prefix_and_blank_is_none() -> None:
    assert CompiledPolicy.from_model(make_policy("wide", ipv6_prefix=48)).ipv6_prefix == 48
    assert CompiledPolicy.from_model(make_policy("default")).ipv6_prefix is None
    # An override's policy keeps the prefix: it counts the same clients.
    policy = search_policy("p", "ip", ipv6_prefix=56)
    assert policy.with_limit(9, override="x").ipv6_prefix == 56


def test_the_request_facts_group_each_policy_by_its_own_prefix() -> None:
    """The address is read once; each policy groups it by its prefix."""
    request = RequestFactory().get("/", REMOTE_ADDR=CLIENT)
    policies = [
        search_policy("by-48", "ip", ipv6_prefix=48),
        search_policy("by-default", "ip"),
        search_policy("by-128", "user_or_ip", ipv6_prefix=128),
    ]
    checks = request_facts.checks_for(request, policies)
    assert [(c.policy.name, c.identity) for c in checks] == [
        ("by-48", "ip:2001:db8:5::/48"),
        ("by-default", "ip:2001:db8:5:1::/64"),
        ("by-128", f"ip:{CLIENT}"),
    ]
    assert [request_facts.policy_identity(request, p) for p in policies] == [
        c.identity for c in checks
    ]


@pytest.mark.django_db
def test_overrides_of_networks_match_a_client_grouped_by_the_policy() -> None:
    policy = make_policy("wide", endpoint="api:search", ipv6_prefix=48)
    PolicyOverride.objects.create(policy=policy, identity="2001:db8:5::/48", limit=9)
    PolicyOverride.objects.create(policy=policy, identity="2001:db8:7::/56", exempt=True)
    (compiled,) = [table.load_table().get("wide")]
    assert compiled is not None

    def applied(address: str) -> Any:
        request = RequestFactory().get("/", REMOTE_ADDR=address)
        return [(c.identity, c.policy.limit) for c in request_facts.checks_for(request, [compiled])]

    assert applied(CLIENT) == [("ip:2001:db8:5::/48", 9)]
    assert applied("2001:db8:7::1") == []  # the /56 inside the client's /48: exempt
    assert applied("2001:db8:8::1") == [("ip:2001:db8:8::/48", 5)]


def test_identity_from_text_groups_by_the_policys_prefix() -> None:
    assert identity_from_text(CLIENT, 48) == "ip:2001:db8:5::/48"
    assert identity_from_text(f"ip:{CLIENT}") == "ip:2001:db8:5:1::/64"
    assert identity_from_text("2001:db8:5::/48", 48) == "ip:2001:db8:5::/48"


@pytest.mark.django_db
def test_the_command_reads_an_identity_by_the_policys_prefix(client: Client) -> None:
    make_policy("wide", endpoint="api:items", methods="GET", ipv6_prefix=48)
    assert client.get("/api/items/", REMOTE_ADDR=CLIENT).status_code == 200
    other_64 = "2001:db8:5:ffff::1"  # another /64 of the same /48: the same client
    out = StringIO()
    call_command(
        "ratelimits", "inspect", "--policy", "wide", "--identity", other_64, "--json", stdout=out
    )
    shown = json.loads(out.getvalue())
    assert shown["key"] == "rl:{ip:2001:db8:5::/48}:wide:log"
    assert shown["count"] == 1
    out = StringIO()
    call_command(
        "ratelimits",
        "reset",
        "--policy",
        "wide",
        "--identity",
        other_64,
        "--yes",
        "--json",
        stdout=out,
    )
    assert json.loads(out.getvalue())["identity"] == "ip:2001:db8:5::/48"
    assert json.loads(out.getvalue())["deleted"] == 1


# --- policy files and the admin -----------------------------------------------------------------


def row(**fields: Any) -> dict[str, Any]:
    return {"name": "wide", "endpoint": "api:search", "limit": 5, "window": 60, **fields}


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_policy_files_carry_the_prefix(fmt: str) -> None:
    make_policy("wide", ipv6_prefix=48)
    make_policy("default")
    rows = parse_document(dump_policies(Policy.objects.order_by("name"), fmt), fmt, "file")
    assert [(r["name"], r["ipv6_prefix"]) for r in rows] == [("default", None), ("wide", 48)]
    Policy.objects.all().delete()
    plan = plan_import(rows)
    assert {p.name: p.ipv6_prefix for p in plan.created} == {"default": None, "wide": 48}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("value", "message"),
    [
        (8, "ipv6_prefix: Ensure this value is greater than or equal to 16."),
        (129, "ipv6_prefix: Ensure this value is less than or equal to 128."),
        ("48", "ipv6_prefix: must be an integer, not a string"),
        (True, "ipv6_prefix: must be an integer, not a boolean"),
    ],
)
def test_a_bad_prefix_in_a_file_is_named(value: Any, message: str) -> None:
    with pytest.raises(PolicyFileError) as raised:
        plan_import([row(ipv6_prefix=value)])
    assert any(
        problem.startswith(f"row 1 (wide): {message}") for problem in raised.value.problems
    ), raised.value.problems
    assert not Policy.objects.exists()


@pytest.mark.django_db
def test_the_admin_form_shows_the_prefix_beside_the_key(admin_client: Client) -> None:
    response = admin_client.get("/admin/ratelimits/policy/add/")
    fields = list(dict(response.context["adminform"].fieldsets)["The limit"]["fields"])
    assert fields[fields.index("key") + 1] == "ipv6_prefix"
    assert 'name="ipv6_prefix"' in response.content.decode()
