"""Redis failing: NOSCRIPT, restarts, a dead or hanging server. Never a 500."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator

import pytest
from django.test import override_settings

from ratelimits.conf import app_settings
from ratelimits.engine.store import connection
from tests.helpers import caches_at, fail_mode_policies

pytestmark = pytest.mark.django_db

#: Seconds a test polls for what it expects before it fails: far beyond what even a
#: loaded machine takes (the breaker's cooldown is 1 s).
WAIT = 30.0


@pytest.fixture
def policies() -> None:
    """``items`` (fail open) and ``login`` (fail closed), each exhausted after 2."""
    fail_mode_policies(
        items={"algorithm": "fixed_window", "limit": 2, "key": "user_or_ip"},
        login={"limit": 2},
    )


@pytest.fixture
def blackhole() -> Iterator[socket.socket]:
    """A listening TCP socket (non-blocking) whose connections the kernel accepts and no
    one answers: a hung Redis. Every connection a client opens there is one wait for an
    answer that never comes, until its timeout (redis-py then drops the connection)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        listener.setblocking(False)
        yield listener


def accept_all(listener: socket.socket, into: list[socket.socket]) -> int:
    """Accept the connections waiting at ``listener`` (kept open in ``into``); how many."""
    accepted = 0
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return accepted
        conn.settimeout(10)  # (what was sent is there already: the client gave up since)
        into.append(conn)
        accepted += 1


def test_script_flush_recovers_without_an_error(client, policies, redis_client):
    assert client.get("/api/items/").status_code == 200
    redis_client.script_flush()
    assert client.get("/api/items/").status_code == 200
    assert client.get("/api/items/").status_code == 429  # still counting: 2 of 2 used


def test_a_restarted_empty_redis_starts_counting_again(client, policies, redis_server):
    assert [client.get("/api/items/").status_code for _ in range(3)] == [200, 200, 429]
    redis_server.restart()
    # The worker denied the 3rd request itself and keeps doing so until it sees that the
    # policy table's stamp is gone with Redis's data, within the refresh interval.
    time.sleep(float(app_settings.POLICY_REFRESH_INTERVAL) + 0.1)
    response = client.get("/api/items/")
    assert response.status_code == 200
    assert response["RateLimit"].startswith('"items";r=1;')


def test_dead_redis_applies_each_policys_fail_mode(client, policies, redis_server, caplog):
    client.get("/api/items/")  # warm
    redis_server.kill()
    with caplog.at_level(logging.WARNING, logger="ratelimits"):
        opened = [client.get("/api/items/").status_code for _ in range(10)]
        closed = [client.post("/api/login/") for _ in range(10)]
    assert opened == [200] * 10
    assert [r.status_code for r in closed] == [429] * 10
    assert all(r["Retry-After"] == "1" for r in closed)
    assert all("RateLimit" not in r for r in closed)  # numbers unknown without Redis
    unavailable = [m for m in caplog.messages if "Redis unavailable" in m]
    assert len(unavailable) == 1  # logged when the breaker opens, not per request


def test_limiting_resumes_when_redis_comes_back(client, policies, redis_server):
    client.get("/api/items/")
    redis_server.kill()
    for _ in range(5):
        assert client.get("/api/items/").status_code == 200
    redis_server.start()
    deadline = time.monotonic() + WAIT
    statuses: list[int] = []
    while time.monotonic() < deadline and 429 not in statuses:
        statuses.append(client.get("/api/items/").status_code)
        time.sleep(0.05)
    assert 429 in statuses, f"limiting did not resume within {WAIT} s of Redis coming back"


def test_a_hanging_redis_costs_one_timeout_then_the_breaker_skips_it(client, policies, blackhole):
    """Counted in waits for the hanging server (its connections), not in seconds: each
    wait is one ``SOCKET_TIMEOUT``, whatever the machine's speed adds to it."""
    timeout = 0.1
    port = blackhole.getsockname()[1]
    with override_settings(
        CACHES=caches_at(port), RATELIMITS={"SOCKET_TIMEOUT": timeout, "BREAKER_COOLDOWN": 60}
    ):
        pool = connection.get_client().connection_pool
        assert pool.connection_kwargs["socket_timeout"] == timeout
        connections: list[socket.socket] = []
        waits, durations = [], []
        for _ in range(30):
            started = time.perf_counter()
            assert client.get("/api/items/").status_code == 200
            durations.append(time.perf_counter() - started)
            waits.append(accept_all(blackhole, connections))
    print(f"\nwaits {waits}, durations {[round(d * 1000, 1) for d in durations]} ms")
    try:
        # Each wait sent a command and got no answer.
        assert all(conn.recv(65536) for conn in connections)
    finally:
        for conn in connections:
            conn.close()
    # The table's version check and two decide calls time out, then the breaker is open:
    # no request waits more than twice, and once one does not wait, none after it does.
    assert 1 <= sum(waits) <= 3, waits
    assert max(waits) <= 2, waits
    assert not any(waits[waits.index(0) :]), waits


def test_a_foreign_value_at_a_key_is_a_fail_mode_not_a_500(client, policies, redis_client, caplog):
    # The first request writes the key; on a cold machine it may miss the limiter's 0.1 s
    # timeout and pass on the fail mode instead, so try until one has written it.
    deadline = time.monotonic() + WAIT
    while not redis_client.keys("rl:*:items:fixed") and time.monotonic() < deadline:
        client.get("/api/items/")
    (key,) = redis_client.keys("rl:*:items:fixed")
    redis_client.delete(key)
    redis_client.set(key, "not a hash")
    with caplog.at_level(logging.ERROR, logger="ratelimits"):
        assert client.get("/api/items/").status_code == 200
    assert any("decide script failed" in m for m in caplog.messages)
    redis_client.delete(key)
    assert client.get("/api/items/").status_code == 200  # the breaker did not open
    assert client.get("/api/items/").status_code == 200
    assert client.get("/api/items/").status_code == 429
