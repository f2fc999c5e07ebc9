"""The setups the command's tests share: clients of several policies, keys to reset, the
demo's policies and a Redis nobody answers at."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory, override_settings

from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.http import request_facts
from ratelimits.testutils import free_port
from tests.cli.traffic import SECRET, V4, add_policy, all_keys, hit, mid_window, redis_now_us


@pytest.fixture
def clients(redis_client) -> dict[str, Any]:
    """Keys of several clients in several policies; identities made by the limiter's own
    code from requests, as the throttle makes them."""
    users = get_user_model()
    alice = users.objects.create_user("alice")
    bob = users.objects.create_user("bob")
    login = add_policy("login", "api:login", key="ip")
    search = add_policy("search", algorithm="sliding_counter", key="user_or_ip")
    payment = add_policy("payment", "/api/payment/*", limit=3, key="user")
    # A fixed window's key expires at the window's end: keep that end far from the test.
    window = mid_window(redis_now_us(redis_client) / 1_000_000)
    api = add_policy(
        "api", "api:items", algorithm="fixed_window", window=window, key="header:X-Api-Key"
    )

    def who(policy: CompiledPolicy, ip: str = "", user: Any = None, **meta: str) -> str:
        request = RequestFactory().get("/", REMOTE_ADDR=ip, **meta)
        request.user = user or AnonymousUser()
        found = request_facts.policy_identity(request, policy)
        assert found is not None
        return found

    ids = {
        "v4": who(login, "203.0.113.7"),
        "v4 neighbour": who(login, "203.0.113.70"),
        "v6": who(login, "2001:db8:1:2::5"),
        "v6 other": who(login, "2001:db8:1:3::5"),
        "alice": who(payment, user=alice),
        "bob": who(payment, user=bob),
        "secret": who(api, "192.0.2.1", HTTP_X_API_KEY=SECRET),
        "other secret": who(api, "192.0.2.1", HTTP_X_API_KEY="another-token"),
    }
    assert ids["v4"] == V4 and ids["v6"] == "ip:2001:db8:1:2::/64"
    assert ids["alice"] == f"u:{alice.pk}"
    traffic = {
        "v4": (login, search),
        "v4 neighbour": (login,),
        "v6": (login, search),
        "v6 other": (login,),
        "alice": (payment, search),
        "bob": (payment,),
        "secret": (api,),
        "other secret": (api,),
    }
    expected = {}
    for name, policies in traffic.items():
        for policy in policies:
            hit(policy, ids[name])
        expected[name] = {p.key_for(ids[name]) for p in policies}
    return {"ids": ids, "keys": expected, "alice": alice, "search": search}


@pytest.fixture
def reset_keys(redis_client) -> dict[str, Any]:
    login = add_policy("login")
    search = add_policy("search", algorithm="sliding_counter")
    whos = [V4, "ip:203.0.113.70", "ip:198.51.100.1"]
    for who in whos:
        hit(login, who)
        hit(search, who)
    redis_client.set("rl:policies:version", 1)
    redis_client.set("rlx:{ip:203.0.113.7}:login:log", 1)
    redis_client.set("other", 1)
    return {"login": {login.key_for(w) for w in whos}, "all": all_keys(redis_client)}


@pytest.fixture
def demo_site(redis_client) -> dict[str, Any]:
    """The demo's policies (and a header one, and a disabled one), and a user."""
    alice = get_user_model().objects.create_user("alice")
    return {
        "alice": alice,
        "login": add_policy("login", "api:login", methods="POST", key="ip", fail_open=False),
        "payment": add_policy("payment", "/api/payment/*", methods="POST", limit=3, key="user"),
        "search": add_policy(
            "search",
            algorithm="sliding_counter",
            limit=20,
            window=3600,
            key="user_or_ip",
            mode="shadow",
        ),
        "api": add_policy(
            "api",
            "api:items",
            algorithm="fixed_window",
            limit=10,
            window=3600,
            key="header:X-Api-Key",
        ),
        "off": add_policy("off", "/api/*", enabled=False),
    }


@pytest.fixture
def dead_redis() -> Iterator[int]:
    """The tool client points at a port nobody listens on (the cluster's startup node, on
    the cluster backend)."""
    port = free_port()
    caches = copy.deepcopy(settings.CACHES)
    caches["default"]["LOCATION"] = f"redis://127.0.0.1:{port}/0"
    ratelimits = dict(getattr(settings, "RATELIMITS", {}))
    if ratelimits.get("CLUSTER_NODES"):
        ratelimits["CLUSTER_NODES"] = [f"redis://127.0.0.1:{port}"]
    with override_settings(CACHES=caches, RATELIMITS=ratelimits):
        yield port
