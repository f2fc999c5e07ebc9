"""Overrides and exemptions: who gets another limit, who gets none, and how fast it applies."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.test import RequestFactory, override_settings
from django.test.utils import CaptureQueriesContext

from ratelimits.engine.table import current as table
from ratelimits.models import Policy, PolicyOverride
from ratelimits.throttling import PolicyThrottle
from tests.helpers import create_policy, decide_calls, start_worker, worker_line

pytestmark = pytest.mark.django_db

API_KEY = "pk_live_partner_5f2e9a"


def admitted(client, n: int = 12, url: str = "/api/items/", **extra) -> int:
    """How many of ``n`` requests pass (each policy here allows fewer than ``n``)."""
    return sum(client.get(url, **extra).status_code == 200 for _ in range(n))


def test_a_user_override_gives_that_user_its_limit(client, alice):
    policy = create_policy(key="user_or_ip")
    PolicyOverride.objects.create(policy=policy, user=alice, limit=5)
    client.force_login(alice)
    assert admitted(client) == 5
    response = client.get("/api/items/")
    assert response.status_code == 429
    assert response["RateLimit-Policy"] == '"items";q=5;w=60'
    client.logout()
    assert admitted(client) == 2  # anonymous: the policy's own limit, counted by address


def test_a_group_override_applies_to_its_members_only(client, alice):
    policy = create_policy(key="user")
    partners = Group.objects.create(name="partners")
    alice.groups.add(partners)
    PolicyOverride.objects.create(policy=policy, group=partners, limit=4)
    bob = User.objects.create_user("bob", password="x")
    client.force_login(alice)
    assert admitted(client) == 4
    client.force_login(bob)
    assert admitted(client) == 2


def test_address_and_network_overrides(client):
    policy = create_policy(key="ip")
    PolicyOverride.objects.create(policy=policy, identity="203.0.113.7", limit=3)
    PolicyOverride.objects.create(policy=policy, identity="10.0.0.0/8", exempt=True)
    assert admitted(client, REMOTE_ADDR="203.0.113.7") == 3
    assert admitted(client, REMOTE_ADDR="203.0.113.8") == 2
    assert admitted(client, REMOTE_ADDR="10.20.30.40") == 12
    response = client.get("/api/items/", REMOTE_ADDR="10.20.30.40")
    assert "RateLimit" not in response  # exempt: no policy applied, nothing to report


def test_an_ipv6_network_override_covers_the_grouped_client(client):
    policy = create_policy(key="ip")
    PolicyOverride.objects.create(policy=policy, identity="2001:db8:aa::/48", limit=4)
    assert admitted(client, REMOTE_ADDR="2001:db8:aa:1::5") == 4
    assert admitted(client, REMOTE_ADDR="2001:db8:bb:1::5") == 2


def test_an_api_key_override_is_stored_hashed_and_matches_the_header(client, redis_client):
    policy = create_policy(key="header:X-Api-Key")
    override = PolicyOverride.objects.create(policy=policy, identity=API_KEY, limit=5)
    assert override.identity.startswith("h:") and len(override.identity) == 34
    assert admitted(client, HTTP_X_API_KEY=API_KEY) == 5
    assert admitted(client, HTTP_X_API_KEY="pk_live_someone_else") == 2
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM ratelimits_policyoverride")
        stored = repr(cursor.fetchall())
    assert API_KEY not in stored
    names = [key.decode() for key in redis_client.scan_iter(count=1000)]
    assert names and not any(API_KEY in name for name in names)
    assert API_KEY not in str(override) and API_KEY not in override.target_display


def test_the_most_specific_override_wins(alice, django_capture_on_commit_callbacks):
    policy = create_policy(key="user_or_ip", limit=2)
    partners = Group.objects.create(name="partners")
    alice.groups.add(partners)
    rows = [
        PolicyOverride.objects.create(policy=policy, user=alice, limit=3),
        PolicyOverride.objects.create(policy=policy, group=partners, limit=6),
        PolicyOverride.objects.create(policy=policy, identity="10.0.0.0/8", limit=8),
        PolicyOverride.objects.create(policy=policy, identity="10.1.0.0/16", limit=9),
    ]

    def applied(user_key: str | None, identity: str = "ip:10.1.2.3") -> int | None:
        compiled = table.get_table().get("items")
        found = compiled.for_client(user_key, identity)
        return found.limit if found else None

    user = str(alice.pk)
    assert applied(user) == 3
    with django_capture_on_commit_callbacks(execute=True):
        rows[0].delete()
    assert applied(user) == 6
    with django_capture_on_commit_callbacks(execute=True):
        rows[1].delete()
    assert applied(user) == 9  # the narrowest network holding the address
    assert applied(None, "ip:10.2.0.1") == 8
    assert applied(None, "ip:192.0.2.1") == 2


def test_a_user_in_several_overridden_groups_gets_the_most_generous(alice):
    policy = create_policy(key="user")
    small, large, free = (Group.objects.create(name=n) for n in ("small", "large", "free"))
    alice.groups.add(small, large)
    PolicyOverride.objects.create(policy=policy, group=small, limit=3)
    PolicyOverride.objects.create(policy=policy, group=large, limit=30)
    PolicyOverride.objects.create(policy=policy, group=free, exempt=True)
    compiled = table.get_table().get("items")
    assert compiled.for_client(str(alice.pk), "u:1").limit == 30
    alice.groups.add(free)
    table.reset()
    assert table.get_table().get("items").for_client(str(alice.pk), "u:1") is None


def test_an_exempt_client_costs_no_redis_call(client, alice, redis_client):
    policy = create_policy(key="user")
    PolicyOverride.objects.create(policy=policy, user=alice, exempt=True)
    client.force_login(alice)
    client.get("/api/items/")  # warm: sessions, the policy table
    before = decide_calls(redis_client)
    assert admitted(client, 20) == 20
    assert decide_calls(redis_client) == before


def test_overrides_keep_one_round_trip_and_no_query_per_request(alice, redis_client):
    partners = Group.objects.create(name="partners")
    alice.groups.add(partners)
    for name, key in (("by-user", "user"), ("by-ip", "ip"), ("everyone", "global")):
        policy = create_policy(name=name, endpoint="api:items", limit=100, key=key)
        PolicyOverride.objects.create(policy=policy, group=partners, limit=200)
        if key == "ip":
            PolicyOverride.objects.create(policy=policy, identity="203.0.113.0/24", limit=300)
    user = User.objects.get(pk=alice.pk)

    def new_request() -> Any:
        request = RequestFactory().get("/api/items/", REMOTE_ADDR="203.0.113.7")
        request.user = user
        request.resolver_match = type("Match", (), {"view_name": "api:items"})()
        return request

    view = type("View", (), {"throttle_scope": None})()
    PolicyThrottle().allow_request(new_request(), view)  # warm: the table, the group members
    request = new_request()
    before = decide_calls(redis_client)
    with CaptureQueriesContext(connection) as queries:
        throttle = PolicyThrottle()
        assert throttle.allow_request(request, view)
    assert len(queries) == 0
    assert decide_calls(redis_client) - before == 1
    limits = {d.policy: d.limit for d in throttle.verdict.decisions}
    assert limits == {"by-user": 200, "by-ip": 200, "everyone": 200}  # group beats identity


@override_settings(RATELIMITS={"EXEMPT_NETWORKS": ["127.0.0.0/8", "192.0.2.0/24"]})
def test_exempt_networks_are_never_limited(client, redis_client):
    create_policy(key="ip")
    before = decide_calls(redis_client)
    assert admitted(client, REMOTE_ADDR="192.0.2.44") == 12
    assert decide_calls(redis_client) == before
    assert admitted(client, REMOTE_ADDR="198.51.100.1") == 2


@pytest.mark.parametrize("proxies", [0, 1])
def test_a_forged_forwarded_for_does_not_reach_an_exempt_network(client, proxies):
    create_policy(key="ip")
    with override_settings(RATELIMITS={"EXEMPT_NETWORKS": ["10.0.0.0/8"], "NUM_PROXIES": proxies}):
        # The client claims 10.0.0.1; the proxy (when there is one) appends the real address.
        forged = "10.0.0.1" if proxies == 0 else "10.0.0.1, 198.51.100.7"
        assert admitted(client, REMOTE_ADDR="198.51.100.7", HTTP_X_FORWARDED_FOR=forged) == 2
        if proxies == 1:  # the proxy's own view of a real internal client is trusted
            assert admitted(client, REMOTE_ADDR="172.16.0.1", HTTP_X_FORWARDED_FOR="10.9.9.9") == 12


def test_override_validation():
    policy = create_policy(key="ip")
    group = Group.objects.create(name="g")
    cases = [
        (PolicyOverride(policy=policy, limit=5), "__all__"),
        (PolicyOverride(policy=policy, group=group, identity="10.0.0.1", limit=5), "__all__"),
        (PolicyOverride(policy=policy, identity="not-an-address", limit=5), "identity"),
        (PolicyOverride(policy=policy, identity="10.0.0.1", limit=5, exempt=True), "limit"),
        (PolicyOverride(policy=policy, identity="10.0.0.1"), "limit"),
        (PolicyOverride(policy=policy, identity="10.0.0.1", limit=-1), "limit"),
    ]
    for override, field in cases:
        with pytest.raises(ValidationError) as error:
            override.full_clean()
        assert field in error.value.message_dict, (override.__dict__, error.value.message_dict)
    by_user = create_policy(name="by-user", key="user")
    with pytest.raises(ValidationError, match="name a user, a group or an API client"):
        PolicyOverride(policy=by_user, identity="10.0.0.1", limit=5).full_clean()
    by_ip = create_policy(name="by-ip", key="ip")
    with pytest.raises(ValidationError, match="only by policies keyed by user or user_or_ip"):
        PolicyOverride(policy=by_ip, identity="auth:key-one", limit=5).full_clean()
    with pytest.raises(ValidationError, match="Write an API client as auth:"):
        PolicyOverride(policy=by_user, identity="auth: ", limit=5).full_clean()
    by_key = create_policy(name="by-key", key="header:X-Api-Key")
    with pytest.raises(ValidationError, match="not an IP address"):  # a typo, not a key
        PolicyOverride(policy=by_key, identity="ip:10.0.0.256", limit=5).full_clean()
    unsaved = Policy(name="new", endpoint="x", limit=5, window=60, key="ip")
    override = PolicyOverride(policy=unsaved, identity="10.1.2.3/8", limit=3)
    override.clean()  # an inline on the add page: the policy has no pk yet
    assert override.identity == "ip:10.0.0.0/8"
    PolicyOverride.objects.create(policy=policy, identity=" 10.0.0.1 ", limit=5)
    duplicate = PolicyOverride(policy=policy, identity="ip:10.0.0.1", limit=7)
    with pytest.raises(ValidationError):
        duplicate.full_clean()


def test_the_database_refuses_an_unhashed_identity():
    policy = create_policy(key="header:X-Api-Key")
    row = PolicyOverride.objects.create(policy=policy, identity=API_KEY, limit=5)
    with pytest.raises(IntegrityError), transaction.atomic():
        PolicyOverride.objects.filter(pk=row.pk).update(identity=API_KEY)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_group_membership_change_reaches_another_worker_within_the_bound(alice):
    policy = create_policy(key="user")
    partners = Group.objects.create(name="partners")
    PolicyOverride.objects.create(policy=policy, group=partners, limit=50)
    worker = start_worker("watch", "items", "30", "alice")
    try:
        assert worker_line(worker)[0] == "2"
        alice.groups.add(partners)
        assert worker_line(worker, time.monotonic())[0] == "50"
        partners.user_set.remove(alice)  # the reverse side announces too
        assert worker_line(worker, time.monotonic())[0] == "2"
    finally:
        worker.kill()
        worker.wait()


def test_a_remembered_denial_does_not_hold_a_client_with_a_higher_limit_on_the_same_key(
    client, alice
):
    """Under a per-address policy, a user behind the same address with a higher limit is
    decided by Redis, not by the denial this worker remembers for the address."""
    policy = create_policy(key="ip", limit=2)
    PolicyOverride.objects.create(policy=policy, user=alice, limit=5)
    assert admitted(client, REMOTE_ADDR="198.51.100.3") == 2  # the address is now denied
    client.force_login(alice)
    assert admitted(client, REMOTE_ADDR="198.51.100.3") == 3  # 5 on the same key, 2 used
