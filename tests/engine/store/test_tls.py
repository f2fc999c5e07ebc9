"""The limiter on a Redis over TLS (a CA and certificates of the test's own, made with
``openssl``): sync and async, the cache's TLS settings carried to both paths, and a
setting only the sync connection understands never failing the async one."""

from __future__ import annotations

import logging
import os
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from ratelimits.engine.store import connection
from ratelimits.exceptions import ConfigurationError
from ratelimits.models import Policy
from ratelimits.testutils import (
    RedisClusterServers,
    RedisSentinel,
    RedisServer,
    free_cluster_port,
)
from tests.helpers import ratelimits_settings
from tests.tls import Certs, shared_certs, tls_options, tls_server

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


def test_a_server_asking_for_client_certificates_limits_sync_and_async(
    client, settings, certs: Certs, policies, caplog
):
    """``tls-auth-clients yes``: the cache's CA, certificate and key reach both paths."""
    with tls_server(certs, auth_clients="yes") as (_, tls_port):
        settings.RATELIMITS = ratelimits_settings(SOCKET_TIMEOUT=1.0)
        tls_cache(
            settings, tls_port, ssl_ca_certs=certs.ca, ssl_certfile=certs.client_cert,
            ssl_keyfile=certs.client_key,
        )  # fmt: skip
        with caplog.at_level(logging.WARNING, logger="ratelimits"):
            found = statuses(client)
    assert found == {"sync": [200, 200, 429], "async": [200, 200, 429]}
    assert not [r for r in caplog.records if r.name == "ratelimits"]


@pytest.mark.slow
def test_a_cluster_over_tls_with_cluster_options(client, settings, certs: Certs, policies):
    """``CLUSTER_OPTIONS`` carries the CA and the client's certificate to every node,
    on both paths (``tls-cluster yes``: the nodes announce their TLS ports)."""
    servers = RedisClusterServers()
    for node in servers.nodes:
        # The TLS port's bus port is 10,000 above it too (so at most 55535).
        tls = tls_options(certs, free_cluster_port(), auth_clients="yes")
        node.extra = (*node.extra, *tls, "--tls-cluster", "yes")
    try:
        try:
            servers.start()
        except RuntimeError as e:
            if "wrong number of arguments" not in str(e) and "TLS support" not in str(e):
                raise
            if os.environ.get("CI") and not os.environ.get("REDIS_SERVER"):
                raise  # CI's first server must have TLS (as tests/tls.py asks)
            pytest.skip("this redis-server has no TLS")
        tls_nodes = [
            f"rediss://127.0.0.1:{node.extra[node.extra.index('--tls-port') + 1]}"
            for node in servers.nodes
        ]
        options = {
            "ssl_ca_certs": certs.ca,
            "ssl_certfile": certs.client_cert,
            "ssl_keyfile": certs.client_key,
        }
        settings.RATELIMITS = ratelimits_settings(
            CLUSTER_NODES=tls_nodes, CLUSTER_OPTIONS=options, SOCKET_TIMEOUT=1.0
        )
        assert statuses(client) == {"sync": [200, 200, 429], "async": [200, 200, 429]}
    finally:
        servers.stop()


def test_cluster_options_that_redis_py_does_not_take_are_a_configuration_error(settings):
    settings.RATELIMITS = ratelimits_settings(
        CLUSTER_NODES=["redis://127.0.0.1:1"], CLUSTER_OPTIONS={"ssl_ca_cert": "/x"}
    )
    with pytest.raises(ConfigurationError, match="ssl_ca_cert,"):
        connection.new_client(0.1)


class TlsSentinel(RedisSentinel):
    """A sentinel (itself on a plain port) watching a primary's TLS port over TLS, so it
    names that port to clients."""

    def __init__(self, primary: RedisServer, tls_port: int, certs: Certs, service: str):
        super().__init__(primary, service)
        self.tls_port, self.certs = tls_port, certs

    def start(self, timeout: float = 10.0) -> TlsSentinel:
        conf = self._dir / "sentinel.conf"
        conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self._dir}\n"
            f"tls-replication yes\ntls-cert-file {self.certs.client_cert}\n"
            f"tls-key-file {self.certs.client_key}\ntls-ca-cert-file {self.certs.ca}\n"
            f"sentinel monitor {self.service} 127.0.0.1 {self.tls_port} 1\n"
            f"sentinel down-after-milliseconds {self.service} 1000\n"
        )
        self._run([self.binary, str(conf), "--sentinel"], timeout)
        return self


def test_behind_sentinel_over_tls_the_async_path_connects_with_tls(
    client, settings, certs: Certs, policies, caplog
):
    """The sentinel names the primary's TLS port; the async path made plain TCP
    connections there (and dropped the ssl_* settings), so async views were never
    limited."""
    with tls_server(certs) as (primary, tls_port):
        service = f"tls{tls_port}"
        with TlsSentinel(primary, tls_port, certs, service) as sentinel:
            settings.DJANGO_REDIS_CONNECTION_FACTORY = "django_redis.pool.SentinelConnectionFactory"
            settings.CACHES = {
                "default": {
                    "BACKEND": "django_redis.cache.RedisCache",
                    "LOCATION": f"redis://{service}/0",
                    "OPTIONS": {
                        "CLIENT_CLASS": "django_redis.client.SentinelClient",
                        "SENTINELS": [("127.0.0.1", sentinel.port)],
                        "CONNECTION_POOL_KWARGS": {"ssl": True, "ssl_ca_certs": certs.ca},
                    },
                }
            }
            settings.RATELIMITS = ratelimits_settings(SOCKET_TIMEOUT=1.0)
            with caplog.at_level(logging.WARNING, logger="ratelimits"):
                found = statuses(client)
    assert found == {"sync": [200, 200, 429], "async": [200, 200, 429]}
    assert not [r for r in caplog.records if r.name == "ratelimits"]
