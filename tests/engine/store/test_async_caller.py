"""The async caller's connections, kept per event loop: what happens to them when a loop
ends (``async_to_sync`` runs each call in a loop of its own: an async view under a WSGI
server, Django's async test client)."""

from __future__ import annotations

import gc

from asgiref.sync import async_to_sync

from ratelimits.engine import limiter
from ratelimits.engine.store import async_caller
from ratelimits.testutils import RedisServer
from tests.helpers import policy

LOOPS = 20


def connected_clients(server: RedisServer) -> int:
    return int(server.client().info("clients")["connected_clients"])


def test_the_connections_of_finished_event_loops_are_let_go(redis_server: RedisServer) -> None:
    """Each ``async_to_sync`` call decides in a new event loop, closed after it. The
    callers of closed loops are dropped, and their connections closed, instead of
    keeping every loop and one open connection per call for the life of the process."""
    checks = [limiter.Check(policy("fixed_window", 1000, 3600), "ip:203.0.113.7")]
    before = connected_clients(redis_server)
    for n in range(LOOPS):
        verdict = async_to_sync(limiter.adecide)(checks)
        assert verdict.allowed and not verdict.decisions[0].failed
        assert verdict.decisions[0].remaining == 1000 - n - 1
    gc.collect()
    assert len(async_caller._by_loop) <= 1  # the last loop's, until another loop comes
    assert connected_clients(redis_server) - before <= 2
