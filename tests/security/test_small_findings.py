"""The smaller findings of the security review (issue 32), each replayed as an attack
against the demo's views and the real Redis the suite starts:

- a client minting ``X-Api-Key`` values gets a fresh counter each, until an ``ip`` policy
  on the same endpoint stops it (all or nothing: the denied requests spend nothing);
- an API key's override survives a ``SECRET_KEY`` rotation kept in
  ``SECRET_KEY_FALLBACKS``, so a rotation cannot cut a paying client down to the default
  limit or lift an exemption's denial list;
- the metrics answer only ``METRICS_ALLOWED_NETWORKS``, by ``REMOTE_ADDR``: a forged
  ``X-Forwarded-For`` does not get them, and they can be mounted apart from the usage view;
- the admin's reset URL with a pk that is not a number is a 404, not a 500;
- a lockout on a global policy (one client locking everyone out) is refused by the policy
  file import, on its row and field, and by the engine;
- shadow mode's log does not grow with minted identities.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse

from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.reporting.shadow_log import shadow_log
from ratelimits.models import Policy, PolicyOverride
from ratelimits.testutils import reset_state
from tests.helpers import problems_of, ratelimits_settings

pytestmark = pytest.mark.django_db

ATTACKER = "203.0.113.66"
OLD, NEW = "old-" + "k" * 50, "new-" + "n" * 50


def minted(client: Client, n: int, url: str = "/api/items/", **extra: Any) -> list[int]:
    """``n`` requests from ATTACKER, each with a fresh X-Api-Key."""
    return [
        client.get(
            url, REMOTE_ADDR=ATTACKER, HTTP_X_API_KEY=secrets.token_hex(8), **extra
        ).status_code
        for _ in range(n)
    ]


def header_keys(redis_client: Any, policy: str) -> list[bytes]:
    return [k for k in redis_client.scan_iter(match="rl:{h:*", count=1000) if policy.encode() in k]


def test_minting_header_values_is_stopped_by_an_ip_ceiling(client, redis_client):
    per_key = Policy.objects.create(
        name="per-key", endpoint="api:items", algorithm="sliding_log", limit=5, window=60,
        key="header:X-Api-Key",
    )  # fmt: skip
    # The attack: a key per request, a counter per key, never a 429.
    assert minted(client, 30) == [200] * 30
    assert len(header_keys(redis_client, "per-key")) == 30
    redis_client.flushall()

    # The documented pairing: an ip policy on the same endpoint caps what an address spends.
    Policy.objects.create(
        name="per-address", endpoint="api:items", algorithm="sliding_log", limit=10, window=60,
        key="ip",
    )  # fmt: skip
    reset_state()  # the worker reads the new table (no commit announces it in a test)
    statuses = minted(client, 30)
    assert statuses == [200] * 10 + [429] * 20
    # All or nothing: the 20 denied requests spent nothing under per-key, so the minted
    # values cost no more Redis keys than the admitted requests.
    assert len(header_keys(redis_client, "per-key")) == 10
    # An honest client with its own key and address is not hurt.
    assert (
        client.get("/api/items/", REMOTE_ADDR="198.51.100.7", HTTP_X_API_KEY="k1").status_code
        == 200
    )
    assert per_key.key == "header:X-Api-Key"


def test_an_api_key_override_survives_a_key_rotation(client):
    partner = "pk_live_partner"
    with override_settings(SECRET_KEY=OLD):
        policy = Policy.objects.create(
            name="per-key", endpoint="api:items", algorithm="sliding_log", limit=2, window=60,
            key="header:X-Api-Key",
        )  # fmt: skip
        PolicyOverride.objects.create(policy=policy, identity=partner, limit=6)
    with override_settings(SECRET_KEY=NEW, SECRET_KEY_FALLBACKS=[OLD]):
        sent = [client.get("/api/items/", HTTP_X_API_KEY=partner).status_code for _ in range(8)]
        assert sent == [200] * 6 + [429] * 2
        response = client.get("/api/items/", HTTP_X_API_KEY=partner)
        assert response["RateLimit-Policy"] == '"per-key";q=6;w=60'


def test_the_metrics_refuse_a_public_address_and_a_forged_header(client):
    assert client.get("/ratelimits/metrics/", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/ratelimits/metrics/", REMOTE_ADDR="10.1.2.3").status_code == 200
    refused = client.get("/ratelimits/metrics/", REMOTE_ADDR=ATTACKER)
    assert refused.status_code == 403
    assert b"ratelimits_decisions" not in refused.content
    # Whatever proxies the site trusts for client addresses, the metrics read REMOTE_ADDR.
    trusting = ratelimits_settings(NUM_PROXIES=1, TRUSTED_PROXIES=["203.0.113.0/24"])
    with override_settings(RATELIMITS=trusting):
        forged = client.get(
            "/ratelimits/metrics/",
            REMOTE_ADDR=ATTACKER,
            HTTP_X_FORWARDED_FOR="127.0.0.1",
            HTTP_FORWARDED="for=127.0.0.1",
        )
    assert forged.status_code == 403
    with override_settings(RATELIMITS=ratelimits_settings(METRICS_ALLOWED_NETWORKS=[])):
        assert client.get("/ratelimits/metrics/", REMOTE_ADDR="127.0.0.1").status_code == 403
    everyone = ratelimits_settings(METRICS_ALLOWED_NETWORKS=["0.0.0.0/0", "::/0"])
    with override_settings(RATELIMITS=everyone):
        assert client.get("/ratelimits/metrics/", REMOTE_ADDR=ATTACKER).status_code == 200
        assert client.get("/ratelimits/metrics/", REMOTE_ADDR="2001:db8::1").status_code == 200


@override_settings(ROOT_URLCONF="tests.security.split_urls")
def test_the_usage_view_and_the_metrics_mount_apart(client):
    assert reverse("ratelimits:usage") == "/ratelimits/usage/"
    assert reverse("ratelimits_metrics:metrics") == "/internal/metrics/"
    assert client.get("/ratelimits/usage/", REMOTE_ADDR=ATTACKER).status_code == 200
    assert client.get("/ratelimits/metrics/", REMOTE_ADDR="127.0.0.1").status_code == 404
    assert client.get("/internal/metrics/", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/internal/metrics/", REMOTE_ADDR=ATTACKER).status_code == 403


@pytest.mark.parametrize("pk", ["abc", "1%27%20OR%201=1", "9" * 30])
def test_posting_a_reset_to_a_bad_pk_is_a_404(pk):
    root = User.objects.create_superuser("root", password="pw")
    admin = Client(raise_request_exception=True)  # a 500 would raise here
    admin.force_login(root, backend="django.contrib.auth.backends.ModelBackend")
    Policy.objects.create(name="login", endpoint="api:login", limit=5, window=60)
    assert admin.post(f"/admin/ratelimits/policy/{pk}/reset-counters/").status_code == 404


def test_a_global_lockout_is_refused_by_the_import_and_the_engine():
    row = {"name": "everyone", "endpoint": "api:login", "limit": 5, "window": 60}
    assert problems_of([{**row, "key": "global", "lockout": 900}]) == [
        "row 1 (everyone): lockout: A global policy has one counter for everyone: one "
        "client's denial would lock every client out. Set the lockout to 0, or count per "
        "user or ip."
    ]
    assert not Policy.objects.exists()
    with pytest.raises(ValueError, match="lockout: A global policy has one counter for everyone"):
        CompiledPolicy.build(algorithm="sliding_log", key="global", lockout=900, **row)


def test_minted_identities_do_not_flood_the_shadow_log(client, caplog):
    Policy.objects.create(
        name="trial", endpoint="api:items", algorithm="sliding_log", limit=1, window=60,
        key="ip", mode="shadow",
    )  # fmt: skip
    with caplog.at_level(logging.INFO, logger="ratelimits"):
        for _ in range(40):
            assert client.get("/api/items/", REMOTE_ADDR=ATTACKER).status_code == 200
    logged = [m for m in caplog.messages if "shadow policy trial" in m]
    assert len(logged) == 1 and ATTACKER in logged[0]
    assert len(shadow_log) == 1
