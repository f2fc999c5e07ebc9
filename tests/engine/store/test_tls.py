"""The limiter on a Redis over TLS (a CA and certificates of the test's own, made with
``openssl``): sync and async, the cache's TLS settings carried to both paths, and a
setting only the sync connection understands never failing the async one."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from ratelimits.models import Policy
from tests.helpers import ratelimits_settings
from tests.tls import Certs, shared_certs, tls_server

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.urls")]


def tls_cache(settings: Any, port: int, **pool: Any) -> None:
    """The default cache (the limiter's Redis) on ``rediss://127.0.0.1:port``."""
    default = settings.CACHES["default"]
    options = {**default.get("OPTIONS", {}), "CONNECTION_POOL_KWARGS": pool}
    settings.CACHES = {
        "default": {**default, "LOCATION": f"rediss://127.0.0.1:{port}/0", "OPTIONS": options}
    }


@pytest.fixture
def certs() -> Certs:
    return shared_certs()


@pytest.fixture
def policies() -> None:
    for name, endpoint in (("sync", "sync"), ("async", "async")):
        Policy.objects.create(
            name=name, endpoint=endpoint, algorithm="fixed_window", limit=2, window=3600,
            key="ip", fail_open=True,
        )  # fmt: skip


def statuses(client: Any) -> dict[str, list[int]]:
    async def on_async() -> list[int]:
        async_client = AsyncClient()
        return [(await async_client.get("/async/")).status_code for _ in range(3)]

    return {
        "sync": [client.get("/sync/").status_code for _ in range(3)],
        "async": async_to_sync(on_async)(),
    }


def test_a_sync_only_tls_setting_is_left_out_of_async_connections_with_one_warning(
    client, settings, certs: Certs, policies, caplog
):
    with tls_server(certs) as (_, tls_port):
        settings.RATELIMITS = ratelimits_settings(SOCKET_TIMEOUT=1.0)
        tls_cache(
            settings, tls_port,
            ssl_ca_certs=certs.ca, ssl_validate_ocsp=False, ssl_ocsp_expected_cert=None,
        )  # fmt: skip
        with caplog.at_level(logging.WARNING, logger="ratelimits"):
            found = statuses(client)
            again = async_to_sync(AsyncClient().get)("/async/")
    assert found == {"sync": [200, 200, 429], "async": [200, 200, 429]}
    assert again.status_code == 429
    dropped = [m for m in caplog.messages if "not taken by redis-py's async" in m]
    assert len(dropped) == 1, caplog.messages
    assert "ssl_ocsp_expected_cert, ssl_validate_ocsp" in dropped[0]
    assert not [m for m in caplog.messages if "unavailable" in m]
