"""Red team: a Redis that is full, busy, a replica, or evicting (issue 32, "Under attack,
it still limits").

Someone who can make the limiter's Redis refuse its calls (fill it to ``maxmemory`` with
keys their requests mint, keep it busy, or ride a failover) must get no more out of it
than the fail mode: each policy's fail_open / fail_closed, the breaker skipping Redis,
one warning per breaker opening (and one when Redis answers again) whatever the number
of requests, never a 5xx, and limiting again within the breaker's cooldown once Redis
takes calls. A pool of our own with no free connection is not Redis failing: the fail
mode for that request, the breaker left closed. And a Redis that evicts (a cache's
``allkeys-lru``) silently resets limits: the deploy check says so, the dashboard and the
metrics show the evictions.

Every test runs a real redis-server of its own (``$REDIS_SERVER``: Redis 6.2 too).
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync
from django.core.checks import run_checks
from django.test import Client
from prometheus_client import REGISTRY, generate_latest

from ratelimits.engine.store import async_caller, breaker, connection
from ratelimits.models import Policy
from ratelimits.testutils import RedisClusterServers, RedisServer
from tests.helpers import caches_at, ratelimits_settings, server_major

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.urls")]

REQUESTS = 200
COOLDOWN = 0.3
#: The flood is spread over at least this long, so that the breaker's cooldown runs out
#: during it several times: each time one call may try Redis, and no more lines appear.
FLOOD_SECONDS = 4 * COOLDOWN
THRESHOLD = 3
FAIL_CLOSED_RETRY_AFTER = 7
#: The table's version check runs often, so a read that succeeds on a server refusing
#: writes (a full one, a replica) meets the breaker many times during a flood.
REFRESH = 0.001
#: Seconds a test waits for Redis to decide again before it fails: far beyond the
#: cooldown, and than even a loaded machine takes.
WAIT = 30.0
#: The generous bound on recovery: the cooldown, then a request or two.
RECOVERY = COOLDOWN + 5.0
FILLER = "filler:"
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
#: Keeps a server busy (reads only, so SCRIPT KILL ends it) for at most ARGV[1] seconds.
BUSY_LOOP = """
local start = tonumber(redis.call('TIME')[1])
while tonumber(redis.call('TIME')[1]) - start < tonumber(ARGV[1]) do end
"""


# --- servers, policies, requests --------------------------------------------------------------


@pytest.fixture
def own_redis(settings: Any) -> Iterator[RedisServer]:
    """A redis-server of the test's own for the limiter."""
    with RedisServer() as server:
        settings.CACHES = caches_at(server.port)
        settings.RATELIMITS = ratelimits_settings(
            SOCKET_TIMEOUT=1.0,
            BREAKER_THRESHOLD=THRESHOLD,
            BREAKER_COOLDOWN=COOLDOWN,
            FAIL_CLOSED_RETRY_AFTER=FAIL_CLOSED_RETRY_AFTER,
            POLICY_REFRESH_INTERVAL=REFRESH,
        )
        yield server


def limit(endpoint: str) -> None:
    """GETs of ``endpoint`` fail open, POSTs fail closed; both fixed windows of 1000 an
    hour per address (a counter's first write is refused under ``maxmemory`` on Redis 6.2
    too, where a script may go on writing once it wrote)."""
    for name, method, fail_open in (("open", "GET", True), ("closed", "POST", False)):
        Policy.objects.create(
            name=f"{endpoint}-{name}",
            endpoint=endpoint,
            methods=method,
            algorithm="fixed_window",
            limit=1000,
            window=3600,
            key="ip",
            fail_open=fail_open,
        )


def fill(client: redis.Redis) -> list[str]:
    """Fill the server to its ``maxmemory`` under ``noeviction``, as an attacker's keys
    (or a cache's) would: 64 KB values until a write is refused, then ``maxmemory`` a
    little under what is used, so that a buffer freed cannot take it back under. Returns
    the filler's keys."""
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", used + 2 * 1024 * 1024)
    keys: list[str] = []
    value = b"x" * 65536
    for n in range(1000):
        key = f"{FILLER}{n}"
        try:
            client.set(key, value)
        except redis.exceptions.OutOfMemoryError:
            break
        keys.append(key)
    else:
        raise AssertionError("the server took 64 MB under a 2 MB maxmemory")
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", used - 256 * 1024)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        client.set("probe", "x")
    return keys


def decided_by_redis(response: Any) -> bool:
    """A fail-mode answer carries no RateLimit header: only Redis knows the numbers."""
    return "RateLimit" in response


def attempts(client: redis.Redis) -> int:
    """Decide calls the server was sent, run or refused."""
    stats = client.info("commandstats")
    total = 0
    for name in ("fcall", "evalsha", "eval"):
        row = stats.get(f"cmdstat_{name}", {})
        total += int(row.get("calls", 0)) + int(row.get("rejected_calls", 0))
    return total


def noisy(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The ratelimits log lines at WARNING and above."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "ratelimits" and record.levelno >= logging.WARNING
    ]


def assert_fail_modes(gets: list[Any], posts: list[Any]) -> None:
    """The fail mode, no 5xx: GETs pass, POSTs get a 429 with FAIL_CLOSED_RETRY_AFTER,
    none decided by Redis."""
    assert [r.status_code for r in gets] == [200] * len(gets)
    assert [r.status_code for r in posts] == [429] * len(posts)
    assert {r["Retry-After"] for r in posts} == {str(FAIL_CLOSED_RETRY_AFTER)}
    assert not any(decided_by_redis(r) for r in gets + posts)


Send = Callable[[str, str], Any]


def sync_sender(client: Any) -> Send:
    """Requests through Django's test client (the sync middleware)."""
    return lambda method, path: getattr(client, method)(path)


def async_sender(async_client: Any) -> Send:
    """Requests through Django's ``AsyncClient`` (``aprocess_view``, ``adecide`` on
    ``redis.asyncio`` connections), all on one event loop, as an ASGI worker serves."""
    loop_runs = async_to_sync  # one loop per call is fine: callers are kept per loop

    def send(method: str, path: str) -> Any:
        async def one() -> Any:
            return await getattr(async_client, method)(path)

        return loop_runs(one)()

    return send


def refused_then_recovered(
    send: Send,
    path: str,
    server: RedisServer,
    caplog: pytest.LogCaptureFixture,
    refuse: Callable[[], Any],
    restore: Callable[[Any], None],
    *,
    count_calls: bool = True,
) -> None:
    """Warm up, make the server refuse calls (``refuse``), send ``REQUESTS`` requests (GETs
    and POSTs in turn), check the fail modes, the one warning and (``count_calls``: a busy
    server answers no INFO) the calls the breaker spared the server; then ``restore`` it
    and check that Redis decides again within the cooldown, with one more line saying so."""
    assert decided_by_redis(send("get", path))  # warm: the code is loaded
    client = server.client()
    state = refuse()
    before = attempts(client) if count_calls else 0
    with caplog.at_level(logging.INFO, logger="ratelimits"):
        gets, posts = [], []
        started = time.monotonic()
        for n in range(REQUESTS // 2):
            gets.append(send("get", path))
            posts.append(send("post", path))
            time.sleep(
                max(0.0, started + FLOOD_SECONDS * (n + 1) / (REQUESTS // 2) - time.monotonic())
            )
        seconds = time.monotonic() - started
        sent = attempts(client) - before if count_calls else 0
        assert_fail_modes(gets, posts)
        assert breaker.breaker.is_open
        lines = noisy(caplog)
        print(f"\n{REQUESTS} requests in {seconds:.2f} s: {len(lines)} warnings, {sent} calls")
        assert len(lines) == 1, lines
        assert "Redis unavailable" in lines[0], lines
        # The breaker spared the server: the calls that opened it, then one per cooldown.
        assert sent <= THRESHOLD + math.ceil(seconds / COOLDOWN) + 1, (sent, seconds)

        restore(state)
        started = time.monotonic()
        while not decided_by_redis(send("get", path)):
            assert time.monotonic() - started < WAIT, f"not decided by Redis in {WAIT} s"
            time.sleep(0.02)
        recovered = time.monotonic() - started
        print(f"decided by Redis again {recovered:.2f} s after the server took calls")
        assert recovered < RECOVERY
        assert send("post", path).status_code == 200  # the fail-closed policy admits
        assert not breaker.breaker.is_open
        lines = noisy(caplog)
    assert len(lines) == 2, lines
    assert "answers again" in lines[1], lines


# --- full (OOM) ----------------------------------------------------------------------------


def test_a_full_redis_gives_the_fail_mode_with_one_warning_per_opening(client, own_redis, caplog):
    limit("sync")
    filler: list[str] = []

    def refuse() -> None:
        filler.extend(fill(own_redis.client()))

    def restore(_: Any) -> None:
        own_redis.client().delete(*filler)

    refused_then_recovered(sync_sender(client), "/sync/", own_redis, caplog, refuse, restore)
    warning = next(m for m in noisy(caplog) if "Redis unavailable" in m)
    assert "OOM" in warning and "maxmemory" in warning, warning


def test_a_full_redis_on_the_async_path(async_client, own_redis, caplog):
    limit("async")
    filler: list[str] = []

    def refuse() -> None:
        filler.extend(fill(own_redis.client()))

    def restore(_: Any) -> None:
        own_redis.client().delete(*filler)

    send = async_sender(async_client)
    refused_then_recovered(send, "/async/", own_redis, caplog, refuse, restore)


# --- busy (a script past busy-reply-threshold) ---------------------------------------------------


def busy_server(server: RedisServer) -> Callable[[], threading.Thread]:
    """Starts a script that keeps ``server`` busy (at most 20 s), once the server answers
    BUSY to others; :func:`end_busy` kills it."""

    def refuse() -> threading.Thread:
        client = server.client()
        threshold = "busy-reply-threshold" if server_major(client) >= 7 else "lua-time-limit"
        client.config_set(threshold, 50)

        def run() -> None:
            with contextlib.suppress(redis.ResponseError):  # killed
                server.client().eval(BUSY_LOOP, 0, 20)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
            except redis.ResponseError as error:
                assert str(error).startswith("BUSY"), error
                return thread
            assert time.monotonic() < deadline, "the server never answered BUSY"
            time.sleep(0.01)

    return refuse


def end_busy(server: RedisServer, thread: threading.Thread) -> None:
    with contextlib.suppress(redis.ResponseError):  # ended already
        server.client().script_kill()
    thread.join(timeout=25)


def test_a_busy_redis_gives_the_fail_mode_with_one_warning_per_opening(client, own_redis, caplog):
    limit("sync")
    refuse = busy_server(own_redis)
    started: list[threading.Thread] = []

    def refusing() -> threading.Thread:
        started.append(refuse())
        return started[-1]

    try:
        refused_then_recovered(
            sync_sender(client),
            "/sync/",
            own_redis,
            caplog,
            refusing,
            lambda thread: end_busy(own_redis, thread),
            count_calls=False,
        )
    finally:
        for thread in started:
            end_busy(own_redis, thread)


# --- a replica (READONLY) --------------------------------------------------------------------


def demote(server: RedisServer, primary: RedisServer) -> None:
    """Make ``server`` a replica of ``primary``, both holding ``server``'s data (as after
    a failover): reads go on working there, the policy table's version stamp among them."""
    source, target = server.client(), primary.client()
    for key in source.scan_iter():
        ttl = max(0, int(source.pttl(key)))
        target.restore(key, ttl, source.dump(key), replace=True)
    if server_major(source) >= 7:
        target.function_restore(source.function_dump(), "REPLACE")
    source.replicaof("127.0.0.1", primary.port)
    deadline = time.monotonic() + 10
    while source.info("replication").get("master_link_status") != "up":
        assert time.monotonic() < deadline, "the replica never synced"
        time.sleep(0.02)


def test_a_redis_turned_replica_gives_the_fail_mode_with_one_warning_per_opening(
    client, own_redis, caplog
):
    """As after a failover the limiter was not told of: its server is a replica now.
    Reads still work there (the table's version check): they must not close the breaker."""
    limit("sync")
    with RedisServer() as primary:

        def refuse() -> None:
            demote(own_redis, primary)

        def restore(_: Any) -> None:
            own_redis.client().replicaof("no", "one")

        refused_then_recovered(sync_sender(client), "/sync/", own_redis, caplog, refuse, restore)


def test_a_redis_turned_replica_on_the_async_path(async_client, own_redis, caplog):
    limit("async")
    with RedisServer() as primary:

        def refuse() -> None:
            demote(own_redis, primary)

        def restore(_: Any) -> None:
            own_redis.client().replicaof("no", "one")

        send = async_sender(async_client)
        refused_then_recovered(send, "/async/", own_redis, caplog, refuse, restore)


# --- our own pool busy ---------------------------------------------------------------------


def test_an_async_pool_busy_on_our_side_gives_the_fail_mode_but_leaves_the_breaker_closed(
    async_client, own_redis, settings, caplog
):
    """Every connection the event loop may open to Redis is held by other calls of ours
    (here: taken out of the pool by the test), so requests wait their SOCKET_TIMEOUT for
    one and get the fail mode. Redis is fine: the breaker stays closed, one line says
    so, and the next request once a connection is free is decided by Redis at once."""
    settings.RATELIMITS = ratelimits_settings(**{**settings.RATELIMITS, "SOCKET_TIMEOUT": 0.05})
    limit("async")

    async def scenario() -> tuple[list[Any], list[Any], Any]:
        warm = await async_client.get("/async/")
        assert decided_by_redis(warm)
        caller = async_caller.for_pool(connection.get_client().connection_pool)
        held = [await caller._take() for _ in range(async_caller.MAX_CONNECTIONS)]
        try:
            gets, posts = [], []
            for _ in range(10):
                gets.append(await async_client.get("/async/"))
                posts.append(await async_client.post("/async/"))
        finally:
            for found in held:
                caller._free.put_nowait(found)
        return gets, posts, await async_client.get("/async/")

    with caplog.at_level(logging.INFO, logger="ratelimits"):
        gets, posts, after = async_to_sync(scenario)()
    assert_fail_modes(gets, posts)
    assert not breaker.breaker.is_open
    assert decided_by_redis(after)  # no cooldown to sit out
    lines = noisy(caplog)
    assert len(lines) == 1, lines
    assert "no connection free" in lines[0] and "not counted" in lines[0], lines


# --- evicting: the deploy check, the danger, the dashboard and the metrics --------------------


def eviction_messages() -> list[Any]:
    return [
        m
        for m in run_checks(include_deployment_checks=True)
        if m.id in ("ratelimits.W030", "ratelimits.W031")
    ]


def test_the_deploy_check_warns_when_the_counters_redis_can_evict_them(own_redis):
    client = own_redis.client()
    client.config_set("maxmemory", 100 * 1024 * 1024)
    client.config_set("maxmemory-policy", "allkeys-lru")
    (warning,) = eviction_messages()
    assert warning.id == "ratelimits.W030"
    assert f"127.0.0.1:{own_redis.port}" in warning.msg
    assert "allkeys-lru" in warning.msg and "100.0 MB" in warning.msg
    assert "noeviction" in warning.hint and "volatile-*" in warning.hint
    assert "TTL" in warning.hint and "logical database" in warning.hint

    client.config_set("maxmemory-policy", "volatile-lru")  # every key of ours has a TTL
    assert [m.id for m in eviction_messages()] == ["ratelimits.W030"]
    client.config_set("maxmemory-policy", "noeviction")
    assert eviction_messages() == []
    client.config_set("maxmemory-policy", "allkeys-lru")
    client.config_set("maxmemory", 0)  # no limit: it never evicts
    assert eviction_messages() == []
    # Not among the checks every runserver or manage.py command runs (it connects).
    assert [m for m in run_checks() if m.id in ("ratelimits.W030", "ratelimits.W031")] == []


def test_the_deploy_check_reads_config_where_info_is_refused(own_redis, settings):
    """An ACL user that may not run INFO (managed services more often forbid CONFIG):
    CONFIG GET answers; one that may run neither gets a clear warning."""
    client = own_redis.client()
    client.config_set("maxmemory", 100 * 1024 * 1024)
    client.config_set("maxmemory-policy", "allkeys-lfu")
    client.acl_setuser(
        "no-info", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-info"]
    )
    client.acl_setuser(
        "neither",
        enabled=True,
        passwords=["+pw"],
        keys=["*"],
        commands=["+@all", "-info", "-config"],
    )
    for user, expected in (("no-info", "ratelimits.W030"), ("neither", "ratelimits.W031")):
        location = f"redis://{user}:pw@127.0.0.1:{own_redis.port}/0"
        settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": location}}
        (message,) = eviction_messages()
        assert message.id == expected, (user, message)
    assert "NoPermissionError" in message.msg and "INFO" in message.hint


def test_the_deploy_check_says_so_cleanly_when_redis_does_not_answer(own_redis):
    own_redis.kill()
    (warning,) = eviction_messages()
    assert warning.id == "ratelimits.W031"
    assert f"127.0.0.1:{own_redis.port}" in warning.msg
    assert "ConnectionError" in warning.msg and "Traceback" not in warning.msg


@pytest.mark.slow
def test_the_deploy_check_asks_every_primary_of_a_cluster(
    settings, redis_cluster: RedisClusterServers
):
    for node in redis_cluster.nodes:
        if node.process is None or node.process.poll() is not None:
            node.start()
    redis_cluster.wait_ok()
    settings.RATELIMITS = ratelimits_settings(CLUSTER_NODES=redis_cluster.startup_nodes)
    last = redis_cluster.nodes[-1].client()
    last.config_set("maxmemory", 50 * 1024 * 1024)
    last.config_set("maxmemory-policy", "allkeys-random")
    try:
        (warning,) = eviction_messages()
        assert warning.id == "ratelimits.W030"
        assert f":{redis_cluster.nodes[-1].port}" in warning.msg
        assert "allkeys-random" in warning.msg
    finally:
        last.config_set("maxmemory", 0)
        last.config_set("maxmemory-policy", "noeviction")
    assert eviction_messages() == []


def evicted_metric(port: int) -> float | None:
    text = generate_latest(REGISTRY).decode()
    found = re.search(
        rf'^ratelimits_redis_evicted_keys_total{{node="127.0.0.1:{port}"}} (\S+)$', text, re.M
    )
    return None if found is None else float(found.group(1))


@pytest.mark.urls("project.urls")
def test_an_evicting_redis_resets_limits_and_the_dashboard_and_metrics_show_it(
    client, admin_user, own_redis, settings
):
    """The danger W030 warns of, shown: under allkeys-lru a client at its limit is let in
    again once other keys (a cache's, or an attacker's) push its counter out. The
    dashboard and the metrics then show the evictions and the policy."""
    settings.RATELIMITS = ratelimits_settings(**{**settings.RATELIMITS, "LOCAL_DENIALS": 0})
    Policy.objects.create(
        name="items", endpoint="api:items", algorithm="fixed_window", limit=3, window=3600,
        key="ip",
    )  # fmt: skip
    assert [client.get("/api/items/").status_code for _ in range(4)] == [200, 200, 200, 429]
    redis_client = own_redis.client()
    (counter,) = redis_client.keys("rl:*:items:*")
    used = int(redis_client.info("memory")["used_memory"])
    redis_client.config_set("maxmemory", used + 1024 * 1024)
    redis_client.config_set("maxmemory-policy", "allkeys-lru")
    value = b"x" * 16384
    for n in range(4096):  # at most 64 MB
        redis_client.set(f"{FILLER}{n}", value)
        if not redis_client.exists(counter):
            break
    assert not redis_client.exists(counter), "the counter was never evicted"
    evicted = int(redis_client.info("stats")["evicted_keys"])
    assert evicted > 0
    # The limit starts again from zero: 3 more for a client that was over it.
    assert client.get("/api/items/").status_code == 200

    admin = Client()
    admin.force_login(admin_user, backend=MODEL_BACKEND)
    html = admin.get("/admin/ratelimits/dashboard/").content.decode()
    shown = re.search(r'class="ratelimits-evicted">(\d+) keys? evicted', html)
    assert shown is not None and int(shown.group(1)) >= evicted, html
    assert "allkeys-lru" in html and "This Redis can evict the counters" in html

    assert (evicted_metric(own_redis.port) or 0) >= evicted
    text = generate_latest(REGISTRY).decode()
    (can_evict,) = [
        line
        for line in text.splitlines()
        if line.startswith("ratelimits_redis_can_evict{") and f":{own_redis.port}" in line
    ]
    assert 'maxmemory_policy="allkeys-lru"' in can_evict and can_evict.endswith(" 1.0")

    redis_client.config_set("maxmemory-policy", "noeviction")
    html = admin.get("/admin/ratelimits/dashboard/").content.decode()
    assert "This Redis can evict the counters" not in html and "noeviction" in html
