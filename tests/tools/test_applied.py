"""``tools.applied``: what applies to the client a key counts, read back from the key's
identity, is what the request path applies to that client (the same engine code)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User
from django.test import RequestFactory

from ratelimits.engine.keys.identity import principal_identity, user_identity
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.policy.overrides import compile_rules
from ratelimits.http import request_facts
from ratelimits.models import Policy, PolicyOverride
from ratelimits.tools import inventory
from ratelimits.tools.applied_rules import EXEMPT_NETWORKS, applied, user_key_of, with_overrides
from tests.helpers import hashed

pytestmark = pytest.mark.django_db

SECRET = "k3y-Of-Partner-ACME-7f2b"
#: What an API client authenticates as when it is not a user (django-ninja's request.auth).
PRINCIPAL = "acme-key"


@pytest.fixture
def site() -> dict[str, Any]:
    """``search`` (3 per 60 s by user or address) and ``by-key`` (3 per 60 s by API key),
    with overrides of every kind."""
    bob = User.objects.create_user("bob")
    alice = User.objects.create_user("alice")
    carol = User.objects.create_user("carol")
    dave = User.objects.create_user("dave")
    partners = Group.objects.create(name="partners")
    staff = Group.objects.create(name="staff")
    alice.groups.add(partners)
    carol.groups.add(staff)
    search = Policy.objects.create(
        name="search", endpoint="search", algorithm="sliding_log", limit=3, window=60
    )
    by_key = Policy.objects.create(
        name="by-key", endpoint="search", limit=3, window=60, key="header:X-Api-Key"
    )
    PolicyOverride.objects.create(policy=search, user=bob, limit=6)
    PolicyOverride.objects.create(policy=search, group=partners, limit=6)
    PolicyOverride.objects.create(policy=search, group=staff, exempt=True)
    PolicyOverride.objects.create(policy=search, identity="203.0.113.0/24", limit=6)
    PolicyOverride.objects.create(policy=search, identity=principal_identity(PRINCIPAL), limit=6)
    PolicyOverride.objects.create(policy=by_key, identity=SECRET, limit=6)
    return {"bob": bob, "alice": alice, "carol": carol, "dave": dave}


def compiled() -> dict[str, CompiledPolicy]:
    return {
        p.name: p
        for p in with_overrides(CompiledPolicy.from_model(p) for p in Policy.objects.all())
    }


def test_each_kind_of_override_names_the_rule_and_gives_its_limit(site):
    policies = compiled()
    search, by_key = policies["search"], policies["by-key"]
    found = {
        who: applied(search, who)
        for who in (
            user_identity(site["bob"].pk),
            user_identity(site["alice"].pk),
            user_identity(site["dave"].pk),
            "ip:203.0.113.9",
            "ip:198.51.100.1",
            principal_identity(PRINCIPAL),
        )
    }
    found[hashed(SECRET)] = applied(by_key, hashed(SECRET))
    assert (
        {who: (a.override, a.policy.limit if a.policy else None) for who, a in found.items()}
        == {
            f"u:{site['bob'].pk}": ("user bob", 6),
            f"u:{site['alice'].pk}": ("group partners", 6),  # a group counts, as on requests
            f"u:{site['dave'].pk}": ("", 3),
            "ip:203.0.113.9": ("203.0.113.0/24", 6),
            "ip:198.51.100.1": ("", 3),
            principal_identity(PRINCIPAL): (
                f"API client (hashed {principal_identity(PRINCIPAL)[2:10]}…)",
                6,
            ),
            hashed(SECRET): (f"API key (hashed {hashed(SECRET)[2:10]}…)", 6),
        }
    )
    assert found[f"u:{site['bob'].pk}"].policy.rate_display == "6 per 60 s"
    assert all(not a.exempt for a in found.values())


def test_an_exempt_client_has_no_policy_and_says_which_override(site, settings):
    carol = applied(compiled()["search"], user_identity(site["carol"].pk))
    assert (carol.policy, carol.override, carol.exempt) == (None, "group staff", True)
    assert carol.label == "exempt (group staff)"
    settings.RATELIMITS = {**settings.RATELIMITS, "EXEMPT_NETWORKS": ["192.0.2.0/24"]}
    network = applied(compiled()["search"], "ip:192.0.2.7")
    assert (network.policy, network.override) == (None, EXEMPT_NETWORKS)


@pytest.mark.parametrize("who", ["bob", "alice", "carol", "dave", "api client", None])
@pytest.mark.parametrize("address", ["203.0.113.9", "198.51.100.1"])
def test_the_rule_of_a_keys_identity_is_the_request_paths(site, who, address):
    """For each client, the policy the request path applies (``request_facts.checks_for``, as
    every face calls it) equals the one read back from the identity of the key it counts
    in; a client the request path leaves out is exempt."""
    policies = compiled()
    request = RequestFactory().get("/api/search/", REMOTE_ADDR=address)
    request.user = site[who] if who in site else AnonymousUser()
    if who == "api client":
        request.auth = PRINCIPAL
    request.META["HTTP_X_API_KEY"] = SECRET
    checks = {c.policy.name: c for c in request_facts.checks_for(request, policies.values())}
    for name, policy in policies.items():
        identity = request_facts.policy_identity(request, policy)
        rule = applied(policy, identity)
        if name in checks:
            assert checks[name].identity == identity
            assert rule.policy == checks[name].policy
            assert rule.override == checks[name].policy.override
        else:
            assert rule.exempt


def test_a_hashed_user_pk_is_found_among_the_users_overrides_name():
    """A pk that identities hash (an e-mail) is matched through the users the overrides
    name, directly or by a group."""
    policy = CompiledPolicy.build(
        name="p", endpoint="x", algorithm="sliding_log", limit=3, window=60
    )
    row = SimpleNamespace(
        user_id=None, group_id=7, group="partners", identity="", exempt=False, limit=6
    )
    rules = compile_rules(policy, [row], {7: frozenset({"ann@example.com"})})
    overridden = replace(policy, overrides=rules)
    who = user_identity("ann@example.com")
    assert who.startswith("u#")
    assert user_key_of(overridden, who) == "ann@example.com"
    assert (applied(overridden, who).override, applied(overridden, who).policy.limit) == (
        "group partners",
        6,
    )
    assert user_key_of(overridden, user_identity("someone@example.com")) is None
    assert applied(overridden, user_identity("someone@example.com")).policy == policy


def test_known_policies_carry_their_overrides(site):
    policies = inventory.known_policies()
    assert policies["search"].overrides is not None
    Policy.objects.filter(name="search").update(enabled=False)  # disabled ones have keys too
    assert inventory.known_policies()["search"].overrides is not None
