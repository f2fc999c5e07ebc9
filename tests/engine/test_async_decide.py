"""The async path of the engine (:func:`limiter.adecide`) on one event loop: exact under
many concurrent coroutines, on a server and on a cluster, sharing keys with the sync
path, keeping few idle connections, and never reading a cancelled call's reply."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ratelimits.engine import limiter
from ratelimits.engine.decision import Verdict
from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.store import async_caller, connection
from tests.helpers import policy, ratelimits_settings, wait_clear_of_window_boundary

on_server_and_cluster = pytest.mark.usefixtures("backend")

ALGORITHMS = ["sliding_log", "compact_log", "sliding_counter", "fixed_window"]
CONCURRENT = 200
LIMIT = 50


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


@on_server_and_cluster
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_concurrent_coroutines_admit_exactly_the_limit(loop, algorithm, settings, backend):
    # A loaded test machine may take longer than 100 ms to connect while 200 coroutines
    # run: that would be the fail mode, working. Exactness is what is tested here.
    settings.RATELIMITS = ratelimits_settings(SOCKET_TIMEOUT=2.0)
    assert connection.is_cluster(connection.get_client()) == (backend == "cluster")
    wait_clear_of_window_boundary(60)
    checked = policy(algorithm, LIMIT, 60, name="burst")
    checks = [Check(checked, "ip:203.0.113.9")]

    async def burst() -> list[Verdict]:
        return await asyncio.gather(*(limiter.adecide(checks) for _ in range(CONCURRENT)))

    verdicts = loop.run_until_complete(burst())
    assert not any(v.decisions[0].failed for v in verdicts)
    assert [v.allowed for v in verdicts].count(True) == LIMIT


@on_server_and_cluster
def test_two_policies_in_one_call_are_all_or_nothing(loop):
    tight = policy("sliding_log", 3, 60, name="tight")
    loose = policy("fixed_window", 100, 60, name="loose", key="user")
    checks = [Check(tight, "ip:203.0.113.9"), Check(loose, "user:7")]

    async def requests() -> list[bool]:
        return [(await limiter.adecide(checks)).allowed for _ in range(5)]

    assert loop.run_until_complete(requests()) == [True, True, True, False, False]
    # The denied requests spent nothing from the loose policy.
    assert limiter.decide(checks, record=False).decisions[1].count == 3


@on_server_and_cluster
def test_the_sync_and_async_paths_count_the_same_keys(loop):
    checks = [Check(policy("sliding_log", 4, 60, name="both"), "ip:203.0.113.9")]
    remaining = []
    for step in range(4):
        if step % 2:
            verdict = loop.run_until_complete(limiter.adecide(checks))
        else:
            verdict = limiter.decide(checks)
        remaining.append(verdict.decisions[0].remaining)
    assert remaining == [3, 2, 1, 0]


def test_a_loop_opens_a_bounded_number_of_connections(loop, redis_client, settings):
    """Counted in the connections the server accepted (``INFO``), not in those it lists
    at some moment: earlier tests' connections may still be closing."""
    # A call that missed the 0.1 s default on a loaded machine would drop its connection
    # (the fail mode, working) and the next would open another: not what is counted here.
    settings.RATELIMITS = ratelimits_settings(SOCKET_TIMEOUT=2.0)
    checks = [Check(policy("fixed_window", 10_000, 60, name="many"), "ip:203.0.113.9")]

    def accepted() -> int:
        return int(redis_client.info("stats")["total_connections_received"])

    before = accepted()

    async def burst() -> None:
        await asyncio.gather(*(limiter.adecide(checks) for _ in range(CONCURRENT)))

    loop.run_until_complete(burst())
    opened = accepted() - before
    assert 1 <= opened <= async_caller.MAX_CONNECTIONS, opened
    # The next requests reuse them: no new connections.
    loop.run_until_complete(burst())
    assert accepted() - before == opened


def test_a_cancelled_call_never_answers_the_next_one(loop, redis_client, settings):
    # Only the cancellation may end a call here: none may miss the 0.1 s default on a
    # loaded machine (a fail-mode answer, not what is tested).
    settings.RATELIMITS = ratelimits_settings(SOCKET_TIMEOUT=2.0)
    checks = [Check(policy("sliding_log", 5, 60, name="cancel"), "ip:203.0.113.9")]
    assert loop.run_until_complete(limiter.adecide(checks)).decisions[0].remaining == 4
    blocker = threading.Thread(target=busy, args=(redis_client, 0.3))

    async def cancelled() -> None:
        task = asyncio.ensure_future(limiter.adecide(checks))
        await asyncio.sleep(0.03)  # sent, waiting for the reply the sleeping server owes
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    blocker.start()
    time.sleep(0.02)
    loop.run_until_complete(cancelled())
    blocker.join()
    # The cancelled call may have counted (Redis ran it); its reply is not read as this one's.
    after = loop.run_until_complete(limiter.adecide(checks)).decisions[0]
    peeked = limiter.decide(checks, record=False).decisions[0]
    assert not after.failed
    assert after.remaining == peeked.remaining + 1  # a look counts itself as admitted
    assert after.remaining in (2, 3)


#: Keeps the server busy for ARGV[1] microseconds (DEBUG SLEEP may be disabled).
_BUSY = """
local start = redis.call('TIME')
local began = start[1] * 1000000 + start[2]
repeat
    local now = redis.call('TIME')
until now[1] * 1000000 + now[2] - began >= tonumber(ARGV[1])
"""


def busy(client: Any, seconds: float) -> None:
    client.eval(_BUSY, 0, int(seconds * 1_000_000))
