"""The decide call written and read on the socket directly (``caller._round_trip``):
a real server's replies, pushes, timeouts and closed connections, as redis-py's own
send and read would meet them."""

from __future__ import annotations

import time

import pytest
import redis
from redis.sentinel import SentinelManagedConnection

from ratelimits.engine import limiter
from ratelimits.engine.decide_protocol import decide_call
from ratelimits.engine.policy.compiled import Check, CompiledPolicy
from ratelimits.engine.store import caller, connection

LIMIT = 1000


@pytest.fixture
def policy() -> CompiledPolicy:
    return CompiledPolicy.build(
        name="lean", endpoint="x", algorithm="fixed_window", limit=LIMIT, window=3600
    )


def held() -> redis.connection.AbstractConnection:
    """This thread's connection of the limiter's caller (made by a first call)."""
    return caller.for_pool(connection.get_client().connection_pool)._held.connection


def remaining(policy: CompiledPolicy, client: str) -> int:
    verdict = limiter.decide([Check(policy, client)])
    (decision,) = verdict.decisions
    assert not decision.failed, "the fail mode answered"
    return decision.remaining


def test_a_plain_connection_is_read_directly_and_counts(policy):
    assert [remaining(policy, "ip:10.0.0.1") for _ in range(3)] == [999, 998, 997]
    assert caller._is_plain(held())


def test_a_sentinel_managed_connection_goes_through_redis_py():
    # Its read turns a demoted primary's READONLY into a reconnect: never bypassed.
    assert SentinelManagedConnection.read_response is not (
        redis.connection.AbstractConnection.read_response
    )
    kind = type("Managed", (SentinelManagedConnection,), {})
    fake = kind.__new__(kind)
    assert not caller._is_plain(fake)


def test_a_push_before_the_reply_is_handed_to_redis_py_not_taken_for_it(policy, redis_client):
    remaining(policy, "ip:10.0.0.2")
    conn = held()
    if str(getattr(conn, "protocol", 2)) != "3" or not caller._is_plain(conn):
        pytest.skip("the limiter's connection does not speak RESP3 read by hiredis here")
    if getattr(conn._parser, "_hiredis_PushNotificationType", None) is None:
        pytest.skip("this redis-py's parser takes no push messages")
    conn.send_command("CLIENT", "TRACKING", "ON")
    assert conn.read_response() in (b"OK", "OK")
    conn.send_command("GET", "lean:tracked")
    conn.read_response()
    redis_client.set("lean:tracked", "changed")  # the server pushes an invalidation
    time.sleep(0.05)
    # A push taken for the reply would make this a failed decision, and the next call
    # would read this one's reply: the counts would be one behind.
    assert remaining(policy, "ip:10.0.0.2") == 998
    assert remaining(policy, "ip:10.0.0.2") == 997


def test_a_timeout_closes_the_connection_and_the_next_call_reads_its_own_reply(
    policy, redis_client
):
    remaining(policy, "ip:10.0.0.3")
    call = decide_call([Check(policy, "ip:10.0.0.3")])
    calls = caller.for_pool(connection.get_client().connection_pool)
    redis_client.execute_command("CLIENT", "PAUSE", 400, "ALL")
    with pytest.raises(redis.TimeoutError):
        calls.call(call)
    assert held()._sock is None  # closed: its late reply cannot answer the next call
    time.sleep(0.5)
    # Another client's first call: a late reply read in its place would say 998.
    assert remaining(policy, "ip:10.0.0.30") == LIMIT - 1
    # The timed-out call counted or not, as the server dropped it with the socket or ran it.
    assert remaining(policy, "ip:10.0.0.3") in (LIMIT - 2, LIMIT - 3)


def test_a_connection_the_server_closed_is_replaced_once(policy, redis_client):
    remaining(policy, "ip:10.0.0.4")
    before = held()._sock
    redis_client.client_kill_filter(_type="normal", skipme=True)
    assert remaining(policy, "ip:10.0.0.4") == LIMIT - 2
    assert held()._sock is not None and held()._sock is not before
