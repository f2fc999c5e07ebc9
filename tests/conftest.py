"""The test run starts its own redis-server on a free port and flushes it between tests;
with ``RATELIMITS_TEST_DATABASE=postgresql`` it starts a PostgreSQL server too
(:mod:`tests.postgres`) and runs on it instead of SQLite.

Test modules that set ``pytestmark = pytest.mark.usefixtures("backend")`` run twice:
against that server and against a local 3-primary Redis Cluster, started once on first
use (``RATELIMITS["CLUSTER_NODES"]`` points the limiter at it; ``redis_client`` is then a
cluster client).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from ratelimits.testutils import RedisClusterServers, RedisServer, reset_state
from tests.helpers.redis_setup import ratelimits_settings
from tests.postgres import PostgresServer

if TYPE_CHECKING:
    from django.contrib.auth.models import User

_server: RedisServer | None = None
_cluster: RedisClusterServers | None = None
_postgres: PostgresServer | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _server, _postgres
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.postgresql":
        _postgres = PostgresServer(port=int(database["PORT"])).start()
    _server = RedisServer().start()
    os.environ["REDIS_URL"] = _server.url
    settings.CACHES["default"]["LOCATION"] = _server.url


def pytest_unconfigure(config: pytest.Config) -> None:
    if _server is not None:
        _server.stop()
    if _cluster is not None:
        _cluster.stop()
    if _postgres is not None:
        _postgres.stop()


def pytest_report_header(config: pytest.Config) -> list[str]:
    if _server is None:
        return ["redis-server: not started"]
    server = _server.server_name()
    database = _postgres.version() if _postgres is not None else "SQLite (a file)"
    return [
        f"{_stack()}, {server}",
        f"{server}: {_server.binary} on port {_server.port}",
        f"database: {database}",
    ]


def _stack() -> str:
    """Python and the versions of the app's requirements this run has (the test matrix's
    row: docs/testing.md)."""
    from importlib.metadata import PackageNotFoundError, version

    found = [f"Python {platform.python_version()}"]
    for name, shown in [
        ("Django", "Django"),
        ("djangorestframework", "DRF"),
        ("redis", "redis-py"),
        ("django-redis", "django-redis"),
        ("django-ninja", "django-ninja"),
    ]:
        try:
            found.append(f"{shown} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{shown}: not installed")
    return ", ".join(found)


@pytest.fixture(scope="session")
def redis_server() -> RedisServer:
    assert _server is not None
    return _server


@pytest.fixture(scope="session")
def redis_cluster() -> RedisClusterServers:
    """The local cluster, started on first use and kept for the session."""
    global _cluster
    if _cluster is None:
        _cluster = RedisClusterServers(primaries=3).start()
    return _cluster


@pytest.fixture(params=["single", "cluster"])
def backend(request: pytest.FixtureRequest, settings: Any) -> Iterator[str]:
    """Run the test against one server, then against the cluster (flushed first)."""
    if request.param == "cluster":
        cluster: RedisClusterServers = request.getfixturevalue("redis_cluster")
        for node in cluster.nodes:
            if node.process is None or node.process.poll() is not None:
                node.start()
        cluster.wait_ok()
        for node in cluster.nodes:
            node.client().flushall()
        settings.RATELIMITS = {
            **getattr(settings, "RATELIMITS", {}),
            "CLUSTER_NODES": cluster.startup_nodes,
        }
        reset_state()
    yield request.param


@pytest.fixture
def patient_redis(settings: Any) -> None:
    """``SOCKET_TIMEOUT`` of 5 s for a test of exactness under a race: there, many
    clients connect at once, and on a loaded machine one connect may take longer than the
    default 0.1 s. That answer is the fail mode working, which such a test is not about."""
    settings.RATELIMITS = ratelimits_settings(SOCKET_TIMEOUT=5)


@pytest.fixture
def redis_client(request: pytest.FixtureRequest, redis_server: RedisServer) -> Any:
    """A client of the server the limiter uses (a cluster client under ``backend``)."""
    if "backend" in request.fixturenames and request.getfixturevalue("backend") == "cluster":
        return request.getfixturevalue("redis_cluster").client()
    return redis_server.client()


@pytest.fixture
def alice() -> User:
    """A user, alice (no password: tests log her in with ``force_login``)."""
    from django.contrib.auth.models import User

    return User.objects.create_user("alice")


@pytest.fixture
def mallory() -> User:
    """A user, mallory, whose password is ``right-password``."""
    from django.contrib.auth.models import User

    return User.objects.create_user("mallory", password="right-password")


@pytest.fixture(autouse=True)
def _clean_state(redis_server: RedisServer) -> Iterator[None]:
    """Every test starts with an empty Redis and no per-process state."""
    if redis_server.process is None or redis_server.process.poll() is not None:
        redis_server.start()
    redis_server.client().flushall()
    reset_state()
    yield
    reset_state()


@pytest.fixture(autouse=True)
def _policy_table_source(request: pytest.FixtureRequest) -> Iterator[None]:
    """The database source, built in the background only when the test's rows are
    committed. In a ``django_db`` test without ``transaction=True`` they live in the test
    thread's open transaction, which another thread does not see: the table is then
    built in the request's thread. After a test, a build still under way is waited for,
    before the test database is emptied: its read and PostgreSQL's TRUNCATE could
    deadlock."""
    from ratelimits.database import policy_source
    from ratelimits.engine.table import current as table
    from ratelimits.engine.table.keeper import keeper

    marker = request.node.get_closest_marker("django_db")
    committed = "transactional_db" in request.fixturenames or bool(
        marker and (marker.kwargs.get("transaction") or marker.args[:1] == (True,))
    )
    table.set_source(policy_source.load, policy_source.close_connections, in_background=committed)
    yield
    keeper.wait_idle(30)
