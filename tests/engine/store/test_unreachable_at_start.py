"""A Redis that cannot be reached when a worker starts is an outage like any other: a
Redis Cluster whose nodes are all still down when the first request comes (no client
can be made: redis-py's cluster client reads the layout as it is made). Each policy's
fail mode, one warning when the breaker opens, the client tried again once per
cooldown (not per request), and limiting once the nodes are up. Never a 500: sync and
async, the DRF throttle and the middleware."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from ratelimits.engine.store import connection
from ratelimits.models import Policy
from ratelimits.testutils import RedisClusterServers
from tests.helpers import ratelimits_settings

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.urls"), pytest.mark.slow]

COOLDOWN = 0.5
WAIT = 30.0
#: The faces: the DRF throttle (an API view), the middleware on a sync and an async view.
PATHS = ("/api/items/", "/sync/", "/async/")


@pytest.fixture
def cluster_not_started(settings: Any) -> Iterator[RedisClusterServers]:
    """A cluster's startup nodes in the settings, none of them running yet."""
    servers = RedisClusterServers()
    settings.RATELIMITS = ratelimits_settings(
        CLUSTER_NODES=servers.startup_nodes, SOCKET_TIMEOUT=0.2, BREAKER_COOLDOWN=COOLDOWN
    )
    for name, endpoint in (("api", "api:items"), ("sync", "sync"), ("async", "async")):
        Policy.objects.create(
            name=name, endpoint=endpoint, algorithm="fixed_window", limit=100, window=3600,
            key="ip", fail_open=True,
        )  # fmt: skip
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def tries(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When a client of the limiter's Redis was tried (counted, not changed)."""
    made: list[float] = []
    create = connection._create_client

    def counted(timeout: float) -> Any:
        made.append(time.monotonic())
        return create(timeout)

    monkeypatch.setattr(connection, "_create_client", counted)
    return made


def decided(response: Any) -> bool:
    return "RateLimit" in response or "X-RateLimit-Limit" in response


def sync_round(client: Any) -> list[Any]:
    return [client.get(path) for path in PATHS]


def async_round() -> list[Any]:
    async def scenario() -> list[Any]:
        client = AsyncClient()
        return [await client.get(path) for path in PATHS]

    return async_to_sync(scenario)()


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_cluster_down_at_start_is_an_outage_then_limiting_resumes(
    face, client, cluster_not_started, tries, caplog
):
    send = (lambda: sync_round(client)) if face == "sync" else async_round
    with caplog.at_level(logging.WARNING, logger="ratelimits"):
        started = time.monotonic()
        down = [response for _ in range(5) for response in send()]
        spent = time.monotonic() - started
    assert [r.status_code for r in down] == [200] * len(down)  # fail open, never a 500
    assert not any(decided(r) for r in down)
    # Tried on the first request, then at most once per cooldown: not per request.
    assert 1 <= len(tries) <= 2 + spent / COOLDOWN, (len(tries), spent)
    opened = [m for m in caplog.messages if "Redis unavailable" in m]
    assert len(opened) == 1, caplog.messages
    assert "could be made" in opened[0]

    cluster_not_started.start()
    deadline = time.monotonic() + WAIT
    while True:
        responses = send()
        if all(decided(r) for r in responses):
            break
        assert all(r.status_code == 200 for r in responses)
        assert time.monotonic() < deadline, "limiting did not resume"
        time.sleep(0.05)
    assert any("answers again" in m for m in caplog.messages)
