"""Hashed overrides across a SECRET_KEY rotation: an API key override stored under a key
now in SECRET_KEY_FALLBACKS still matches, on the request path and in the tools, and the
hot path hashes a secret once unless such an override may need the fallbacks."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import override_settings

from ratelimits.engine.keys import identity
from ratelimits.engine.keys import rotation as key_rotation
from ratelimits.engine.policy.overrides import Exemption, compile_rules
from ratelimits.models import PolicyOverride
from tests.helpers import create_policy, hashed, policy, run

pytestmark = pytest.mark.django_db

OLD, NEW = "old-secret-key-" + "x" * 40, "new-secret-key-" + "y" * 40
API_KEY = "pk_live_partner_5f2e9a"


def admitted(client, n: int = 8, **extra) -> int:
    return sum(client.get("/api/items/", **extra).status_code == 200 for _ in range(n))


@pytest.fixture
def stored_under_old_key():
    """``items``: 2 per 60 s per X-Api-Key; API_KEY's override (5) hashed under OLD."""
    with override_settings(SECRET_KEY=OLD):
        items = create_policy(key="header:X-Api-Key")
        override = PolicyOverride.objects.create(policy=items, identity=API_KEY, limit=5)
        assert override.identity == hashed(API_KEY)
    return override


def test_an_override_hashed_under_a_fallback_key_still_matches(client, stored_under_old_key):
    with override_settings(SECRET_KEY=NEW, SECRET_KEY_FALLBACKS=[OLD]):
        assert hashed(API_KEY) != stored_under_old_key.identity
        assert admitted(client, HTTP_X_API_KEY=API_KEY) == 5
        assert admitted(client, HTTP_X_API_KEY="pk_live_someone_else") == 2


def test_without_the_fallback_the_override_no_longer_matches(client, stored_under_old_key):
    """What the fallback fixes: the old key gone, the stored hash names nobody."""
    with override_settings(SECRET_KEY=NEW, SECRET_KEY_FALLBACKS=[]):
        assert admitted(client, HTTP_X_API_KEY=API_KEY) == 2


def test_an_override_under_the_current_key_wins_without_the_fallbacks(client):
    with override_settings(SECRET_KEY=NEW, SECRET_KEY_FALLBACKS=[OLD]):
        items = create_policy(key="header:X-Api-Key")
        PolicyOverride.objects.create(policy=items, identity=API_KEY, limit=4)
        assert admitted(client, HTTP_X_API_KEY=API_KEY) == 4


def test_the_fallbacks_are_hashed_only_on_a_miss_among_hashed_overrides(settings):
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW, [OLD]
    p = policy("sliding_log", 2, 60, key="header:X-Api-Key")
    asked: list[str] = []

    def previous() -> tuple[str, ...]:
        asked.append("asked")
        return key_rotation.header_identities("HTTP_X_API_KEY", API_KEY)

    class Row:
        user_id = group_id = None
        exempt, limit = False, 5

    old_row, new_row = Row(), Row()
    old_row.identity = identity.header_identity(
        "HTTP_X_API_KEY", API_KEY, identity.hash_key_of(OLD)
    )
    new_row.identity = hashed("pk_live_current")
    rules = compile_rules(p, [old_row, new_row], {})
    assert rules is not None and rules.hashed
    assert rules.rule(p, None, hashed("pk_live_current"), previous).limit == 5
    assert asked == []  # a hit under the current key: one HMAC, as before
    assert rules.rule(p, None, hashed(API_KEY), previous).limit == 5
    assert asked == ["asked"]
    # A policy whose overrides are all addresses never asks.
    address = Row()
    address.identity = "ip:203.0.113.7"
    by_address = compile_rules(p, [address], {})
    assert by_address is not None and not by_address.hashed
    assert by_address.rule(p, None, hashed(API_KEY), previous) is p
    assert asked == ["asked"]


def test_an_api_client_override_under_a_fallback_key(settings):
    """``auth:<principal>`` overrides (an API client that is not a user) too."""
    p = policy("sliding_log", 2, 60, key="user_or_ip")

    class Row:
        user_id = group_id = None
        exempt, limit = True, None
        identity = identity.principal_identity("key-one", identity.hash_key_of(OLD))

    rules = compile_rules(p, [Row()], {})
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW, ["unrelated", OLD]
    now = identity.principal_identity("key-one")
    assert rules.rule(p, None, now) is p  # no fallbacks given: not matched
    found = rules.rule(p, None, now, lambda: key_rotation.principal_identities("key-one"))
    assert isinstance(found, Exemption)


def test_the_fallback_keys_follow_the_setting(settings):
    settings.SECRET_KEY_FALLBACKS = [OLD]
    assert key_rotation.fallback_keys() == (identity.hash_key_of(OLD),)
    settings.SECRET_KEY_FALLBACKS = []
    assert key_rotation.fallback_keys() == ()


def test_inspect_and_reset_by_the_api_key_after_a_rotation(
    client, redis_client, stored_under_old_key
):
    """The command applies the old override as the request path does, and a reset with
    the key deletes the counts made before the rotation (named by the old hash) too."""
    with override_settings(SECRET_KEY=OLD):
        assert admitted(client, 3, HTTP_X_API_KEY=API_KEY) == 3  # counted under the old hash
    with override_settings(SECRET_KEY=NEW, SECRET_KEY_FALLBACKS=[OLD]):
        assert admitted(client, 1, HTTP_X_API_KEY=API_KEY) == 1  # afresh under the new one
        who = f"header:X-Api-Key={API_KEY}"
        out = run("inspect", "--policy", "items", "--identity", who)
        assert "override   API key (hashed" in out
        assert "count      1 of 5" in out
        out = run("reset", "--policy", "items", "--identity", who, "--yes")
        assert (
            out.splitlines()[-1] == f"Deleted 2 keys for policy items, identity {hashed(API_KEY)}."
        )
        assert not list(redis_client.scan_iter(match="rl:*items*"))


def test_a_group_override_does_not_depend_on_the_secret_key(client, alice, settings):
    """Users and groups are matched by pk: a rotation changes nothing for them."""
    items = create_policy(key="user")
    partners = Group.objects.create(name="partners")
    alice.groups.add(partners)
    PolicyOverride.objects.create(policy=items, group=partners, limit=4)
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW, [OLD]
    client.force_login(alice)
    assert admitted(client) == 4
