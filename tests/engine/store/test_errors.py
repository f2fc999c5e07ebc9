"""What a Redis error says about the server, read from errors real servers answer: a
server refusing every call for now (full, busy, a replica, a replica without its primary,
too few replicas) is an outage; an error about the keys is not; a pool of ours without a
free connection is neither."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis
from redis.exceptions import BusyLoadingError, ResponseError

from ratelimits.engine.store import errors
from ratelimits.testutils import RedisServer
from tests.helpers import server_major

#: A script that keeps the server busy until killed (reads only, so SCRIPT KILL works),
#: for at most ARGV[1] seconds.
BUSY_LOOP = """
local start = tonumber(redis.call('TIME')[1])
while tonumber(redis.call('TIME')[1]) - start < tonumber(ARGV[1]) do end
"""
WRITE = "redis.call('SET', KEYS[1], 'x')"


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer() as found:
        yield found


def refused(call) -> Exception:
    """The Redis error ``call`` raises."""
    with pytest.raises(redis.RedisError) as raised:
        call()
    return raised.value


def assert_outage(error: Exception, code: str) -> None:
    assert errors.code_of(error) == code, repr(error)
    assert errors.is_outage(error)
    assert not errors.is_pool_busy(error)
    assert errors.describe(error).startswith(code + " "), errors.describe(error)


def test_a_full_server_is_an_outage(server):
    client = server.client()
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", 1)
    assert_outage(refused(lambda: client.set("k", "v")), "OOM")
    # A script's first counting write (Redis 6.2 wraps the command's error in its own;
    # Redis 7 answers the command's).
    assert_outage(refused(lambda: client.eval(WRITE, 1, "k")), "OOM")


def test_a_busy_server_is_an_outage(server):
    client = server.client()
    threshold = "busy-reply-threshold" if server_major(client) >= 7 else "lua-time-limit"
    client.config_set(threshold, 50)
    busy = threading.Thread(target=lambda: refused(lambda: server.client().eval(BUSY_LOOP, 0, 20)))
    busy.start()
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
            except ResponseError as error:
                assert_outage(error, "BUSY")
                break
            assert time.monotonic() < deadline, "the server never answered BUSY"
            time.sleep(0.02)
    finally:
        client.script_kill()
        busy.join()


def test_a_replica_is_an_outage_and_so_is_one_that_lost_its_primary(server):
    with RedisServer() as primary:
        replica = server.client()
        replica.replicaof("127.0.0.1", primary.port)
        assert_outage(refused(lambda: replica.set("k", "v")), "READONLY")
        # In a script: Redis 6.2 wraps it ("… @user_script: 1: -READONLY …").
        assert_outage(refused(lambda: replica.eval(WRITE, 1, "k")), "READONLY")
        replica.config_set("replica-serve-stale-data", "no")
        primary.kill()
        deadline = time.monotonic() + 10
        while replica.info("replication")["master_link_status"] != "down":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert_outage(refused(lambda: replica.get("k")), "MASTERDOWN")
    replica.replicaof("no", "one")


def test_too_few_replicas_to_write_is_an_outage(server):
    client = server.client()
    client.config_set("min-replicas-to-write", 1)
    assert_outage(refused(lambda: client.set("k", "v")), "NOREPLICAS")


def test_loading_and_a_failing_save_are_outages():
    """Not produced here (a large data set to load; a disk that fails): as redis-py
    raises them for the answers ``-LOADING …`` and ``-MISCONF …``."""
    assert_outage(BusyLoadingError("Redis is loading the dataset in memory"), "LOADING")
    misconf = ResponseError("MISCONF Redis is configured to save RDB snapshots, but ...")
    assert_outage(misconf, "MISCONF")


def test_errors_about_the_keys_are_not_outages(server):
    client = server.client()
    client.set("k", "v")
    for error in (
        refused(lambda: client.lpush("k", "x")),  # WRONGTYPE
        refused(lambda: client.eval("return redis.call('LPUSH', KEYS[1], 'x')", 1, "k")),
        refused(lambda: client.eval("error('ratelimits: unknown algorithm x')", 0)),
        refused(lambda: client.evalsha("0" * 40, 0)),  # NOSCRIPT
    ):
        assert errors.code_of(error) is None, repr(error)
        assert not errors.is_outage(error), repr(error)
        assert errors.describe(error) == str(error)


def test_an_unreachable_server_is_an_outage():
    with RedisServer() as gone:
        client = gone.client()
    error = refused(client.ping)
    assert errors.code_of(error) is None
    assert errors.is_outage(error)


def test_no_free_connection_of_ours_is_not_an_outage(server):
    """redis-py's pools at their limit: a blocking one after its timeout, a plain one at
    once; and the async caller's own (:class:`errors.PoolBusy`)."""
    blocking = redis.BlockingConnectionPool(port=server.port, max_connections=1, timeout=0.05)
    plain = redis.ConnectionPool(port=server.port, max_connections=1)
    for pool in (blocking, plain):
        held = pool.get_connection("PING")  # a command name: redis-py before 6 requires one
        try:
            error = refused(lambda pool=pool: pool.get_connection("PING"))
        finally:
            pool.release(held)
            pool.disconnect()
        assert errors.is_pool_busy(error), repr(error)
        assert not errors.is_outage(error), repr(error)
    busy = errors.PoolBusy("all 16 connections to Redis stayed busy 0.1 s")
    assert errors.is_pool_busy(busy) and not errors.is_outage(busy)
