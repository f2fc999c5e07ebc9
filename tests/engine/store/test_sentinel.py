"""The limiter behind Redis Sentinel, through django-redis's SentinelClient: a primary, a
replica and one sentinel, all started here on 127.0.0.1; then a failover."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from redis.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool

from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.store import connection, failover
from ratelimits.testutils import RedisSentinel, RedisServer
from tests.helpers import (
    item_statuses,
    make_policy,
    sentinel_failover,
    sentinel_servers,
    sentinel_switch,
    through_sentinels,
)

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def sentinel_site(settings: Any) -> Iterator[tuple[RedisServer, RedisServer, RedisSentinel]]:
    with sentinel_servers(settings) as servers:
        yield servers


def test_the_limiter_reaches_the_primary_through_the_sentinel_with_its_own_timeout(
    client, sentinel_site
):
    primary, _, sentinel = sentinel_site
    make_policy("items", limit=2)
    pool = connection.get_client().connection_pool
    assert isinstance(pool, SentinelConnectionPool) and pool.service_name == sentinel.service
    assert pool.connection_kwargs["socket_timeout"] == 0.1  # not the cache's 1 s
    assert item_statuses(client, "203.0.113.7", 3) == [200, 200, 429]
    assert primary.client().exists("rl:{ip:203.0.113.7}:items:log")


def test_after_a_failover_limiting_continues_on_the_new_primary(client, sentinel_site):
    primary, replica, sentinel = sentinel_site
    make_policy("items", limit=2)
    assert item_statuses(client, "203.0.113.7", 3) == [200, 200, 429]
    sentinel_failover(primary, replica, sentinel)
    seen: list[int] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        seen.extend(item_statuses(client, "198.51.100.9", 3))
        if seen[-3:] == [200, 200, 429]:
            break
        client.get("/api/items/", REMOTE_ADDR="198.51.100.10")  # traffic while it settles
        time.sleep(0.1)
        seen.clear()
    assert seen[-3:] == [200, 200, 429], seen
    assert replica.client().exists("rl:{ip:198.51.100.9}:items:log")
    assert replica.client().info("replication")["role"] == "master"


@pytest.mark.parametrize("path", ["sync", "async"])
def test_an_operators_failover_moves_the_limiter_before_the_old_primary_is_demoted(
    client, sentinel_site, path
):
    """``SENTINEL FAILOVER``: the old primary keeps answering, and taking writes its
    demotion throws away, until Sentinel demotes it (about ten seconds). The limiter hears
    Sentinel's ``+switch-master`` and moves its held connection at once, so it counts on
    the new primary while the old one is still a primary."""
    primary, replica, sentinel = sentinel_site
    make_policy("items", limit=100)
    if path == "async":
        async_to_sync(_failover_on_one_loop)(primary, replica, sentinel)
        return
    assert item_statuses(client, "203.0.113.7", 1) == [200]  # a connection held on the primary
    sentinel_switch(replica, sentinel)
    deadline = time.monotonic() + 30
    key = "rl:{ip:198.51.100.9}:items:log"
    while not replica.client().exists(key):
        assert time.monotonic() < deadline, "the limiter never reached the new primary"
        assert item_statuses(client, "198.51.100.9", 1) == [200]
        old_role = primary.client().info("replication")["role"]
        time.sleep(0.05)
    assert old_role == "master"  # moved before the demotion, not because of it


async def _admitted(ip: str) -> bool:
    """Whether ``adecide`` admits ``ip`` to /api/items/, decided by Redis, on the running
    event loop's own connections."""
    from ratelimits.engine import limiter
    from ratelimits.engine.table import current as table

    items = (await table.aget_table()).match(
        method="GET", path="/api/items/", scope=None, url_name="api:items"
    )[0]
    verdict = await limiter.adecide([Check(items, f"ip:{ip}")])
    return verdict.allowed and not verdict.decisions[0].failed


async def _failover_on_one_loop(
    primary: RedisServer, replica: RedisServer, sentinel: RedisSentinel
) -> None:
    """The test above on the async path: decisions on one event loop, whose connections
    are held across requests, through ``adecide``."""
    assert await _admitted("203.0.113.7")  # connections held on the primary
    await asyncio.to_thread(sentinel_switch, replica, sentinel)
    key = "rl:{ip:198.51.100.9}:items:log"
    deadline = time.monotonic() + 30
    while not replica.client().exists(key):
        assert time.monotonic() < deadline, "the limiter never reached the new primary"
        assert await _admitted("198.51.100.9")
        old_role = primary.client().info("replication")["role"]
        await asyncio.sleep(0.05)
    assert old_role == "master"


def test_an_operators_failover_moves_every_connection_an_event_loop_holds(client, sentinel_site):
    """Concurrent decisions on one event loop hold several connections to the primary.
    When Sentinel names a new primary they all move, not only the one used last: a
    connection left on the old primary would be taken again under concurrency and count
    there until its demotion (about ten seconds) throws the counts away."""
    primary, replica, sentinel = sentinel_site
    make_policy("items", limit=100)
    async_to_sync(_concurrent_failover_on_one_loop)(primary, replica, sentinel)


async def _concurrent_failover_on_one_loop(
    primary: RedisServer, replica: RedisServer, sentinel: RedisSentinel
) -> None:
    async def admit_together(ip: str) -> None:
        assert all(await asyncio.gather(*(_admitted(ip) for _ in range(CONCURRENT))))

    await admit_together("203.0.113.7")  # several connections held on the primary
    heard = failover.generation_of(connection.get_client().connection_pool)
    assert heard is not None
    before = heard.value
    await asyncio.to_thread(sentinel_switch, replica, sentinel)
    deadline = time.monotonic() + 30
    while heard.value == before:  # this process's listener hears the switch
        assert time.monotonic() < deadline, "the switch was never heard"
        await asyncio.sleep(0.01)
    for _ in range(3):
        await admit_together("198.51.100.9")
    key = "rl:{ip:198.51.100.9}:items:log"
    assert replica.client().zcard(key) == 3 * CONCURRENT
    assert not primary.client().exists(key)  # nothing counted on the old primary...
    assert primary.client().info("replication")["role"] == "master"  # ...a primary still


#: Decisions sent together on one loop: each holds a connection of its own.
CONCURRENT = 4


def test_a_sentinel_that_has_not_heard_of_a_failover_does_not_send_the_limiter_back(
    client, settings
):
    """Right after a failover the sentinels disagree for a few milliseconds (2 to 5 ms
    between the one that ran it and two others, measured here): a limiter that heard the
    switch and asked one still naming the old primary would count there until Sentinel
    demoted it, about ten seconds, and lose it all. Two sentinels that disagree for good
    stand in for that moment: ``stale`` watches a primary of its own, ``fresh`` has failed
    its pair over, a newer configuration (``config-epoch`` 1). Listed first, the stale one
    is what redis-py's discovery takes; the limiter takes the newest, sync and async."""
    with (
        RedisServer() as elsewhere,
        RedisServer() as old,
        RedisServer(extra=("--replicaof", "127.0.0.1", str(old.port))) as new,
    ):
        service = f"service{old.port}"
        with (
            RedisSentinel(elsewhere, service) as stale,
            RedisSentinel(old, service) as fresh,
        ):
            sentinel_switch(new, fresh)
            # Its configuration switched (SENTINEL MASTERS names the new primary a moment
            # after GET-MASTER-ADDR-BY-NAME does).
            _wait_discovered(Sentinel([("127.0.0.1", fresh.port)]), service, new.port)
            listed = [("127.0.0.1", stale.port), ("127.0.0.1", fresh.port)]
            _wait_discovered(Sentinel(listed), service, elsewhere.port)  # the first one's
            through_sentinels(settings, service, [stale, fresh])
            make_policy("items", limit=2)
            assert item_statuses(client, "203.0.113.7", 3) == [200, 200, 429]
            assert async_to_sync(_admitted)("198.51.100.9")
            for ip in ("203.0.113.7", "198.51.100.9"):
                key = f"rl:{{ip:{ip}}}:items:log"
                assert new.client().exists(key)
                assert not elsewhere.client().exists(key) and not old.client().exists(key)


def _wait_discovered(manager: Sentinel, service: str, port: int) -> None:
    """Until redis-py's discovery through ``manager`` names the primary on ``port``."""
    deadline = time.monotonic() + 10
    while True:
        try:
            found: int | None = int(manager.discover_master(service)[1])
        except MasterNotFoundError:
            found = None
        if found == port:
            return
        assert time.monotonic() < deadline, f"discovered :{found}, not :{port}"
        time.sleep(0.05)
