"""The test run starts its own redis-server on a free port and flushes it between tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis

from ratelimits.testutils import RedisServer, reset_state

_server: RedisServer | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _server
    _server = RedisServer().start()
    os.environ["REDIS_URL"] = _server.url
    from django.conf import settings

    settings.CACHES["default"]["LOCATION"] = _server.url


def pytest_unconfigure(config: pytest.Config) -> None:
    if _server is not None:
        _server.stop()


def pytest_report_header(config: pytest.Config) -> str:
    if _server is None:
        return "redis-server: not started"
    version = _server.client().info("server")["redis_version"]
    return f"redis-server {version}: {_server.binary} on port {_server.port}"


@pytest.fixture(scope="session")
def redis_server() -> RedisServer:
    assert _server is not None
    return _server


@pytest.fixture
def redis_client(redis_server: RedisServer) -> redis.Redis:
    return redis_server.client()


@pytest.fixture(autouse=True)
def _clean_state(redis_server: RedisServer) -> Iterator[None]:
    """Every test starts with an empty Redis and no per-process state."""
    if redis_server.process is None or redis_server.process.poll() is not None:
        redis_server.start()
    redis_server.client().flushall()
    reset_state()
    yield
    reset_state()
