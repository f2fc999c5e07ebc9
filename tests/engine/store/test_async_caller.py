"""The async caller's connections, kept per event loop: what happens to them when a loop
ends (``async_to_sync`` runs each call in a loop of its own: an async view under a WSGI
server, Django's async test client)."""

from __future__ import annotations

import gc

import pytest
from asgiref.sync import async_to_sync

from ratelimits.engine import limiter
from ratelimits.engine.store import async_caller
from ratelimits.testutils import RedisServer
from tests.helpers import policy

LOOPS = 20


def connected_clients(server: RedisServer) -> int:
    return int(server.client().info("clients")["connected_clients"])


@pytest.mark.usefixtures("patient_redis")
def test_the_connections_of_finished_event_loops_are_let_go(redis_server: RedisServer) -> None:
    """Each ``async_to_sync`` call decides in a new event loop, closed after it. The
    callers of closed loops are dropped, and their connections closed, instead of
    keeping every loop and one open connection per call for the life of the process.
    (Each loop connects anew: hence ``patient_redis``.)"""
    checks = [limiter.Check(policy("fixed_window", 1000, 3600), "ip:203.0.113.7")]
    before = connected_clients(redis_server)
    for n in range(LOOPS):
        verdict = async_to_sync(limiter.adecide)(checks)
        assert verdict.allowed and not verdict.decisions[0].failed
        assert verdict.decisions[0].remaining == 1000 - n - 1
    gc.collect()
    assert len(async_caller._by_loop) <= 1  # the last loop's, until another loop comes
    assert connected_clients(redis_server) - before <= 2


def test_a_connection_that_got_an_error_reply_is_used_again(redis_server: RedisServer) -> None:
    """An error reply (here the decide code failing on a foreign value at its key) is
    read whole: the connection is clean, and the next call on the loop takes it again,
    as the sync caller keeps its own."""
    limited = policy("fixed_window", 10, 3600)
    foreign = limiter.Check(limited, "ip:203.0.113.7")
    fine = limiter.Check(limited, "ip:203.0.113.8")
    redis_server.client().set(foreign.key, "not a hash")

    async def calls() -> list[bool]:
        failed = []
        for check in (fine, foreign, foreign, fine, foreign):
            verdict = await limiter.adecide([check])
            failed.append(verdict.decisions[0].failed)
        return failed

    received = int(redis_server.client().info("stats")["total_connections_received"])
    assert async_to_sync(calls)() == [False, True, True, False, True]
    made = int(redis_server.client().info("stats")["total_connections_received"]) - received
    assert made == 1 + 1  # the loop's one connection, and this test's INFO
