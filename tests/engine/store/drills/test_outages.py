"""Redis killed, flushed, restarted empty and paused while 8 threads send requests: each
policy's fail mode within the timeout, never a 500, and exact admission again once Redis
answers."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from ratelimits.engine.keys import names as keys
from ratelimits.models import Policy
from ratelimits.testutils import RedisServer
from tests.engine.store.drills.traffic import (
    PACE,
    PHASE,
    SLACK,
    THREADS,
    WAIT,
    ClientLoad,
    Sample,
    assert_fail_modes,
    assert_never_an_error,
    between,
    get_items,
    items_and_login,
    limited_again,
    ms,
    p99,
)
from tests.helpers import (
    require_functions,
    wait_clear_of_window_boundary,
)

pytestmark = pytest.mark.django_db(transaction=True)


# --- Redis killed under load ----------------------------------------------------------------


def test_redis_killed_mid_load(
    fail_policies: None, explicit_timeout: float, no_gc_pauses: None, redis_server: RedisServer
) -> None:
    """Killed while 8 threads send: each policy's fail mode at once, no added latency worth
    the name, and limiting again soon after the server is back."""
    timeout = explicit_timeout
    with ClientLoad(items_and_login, warm=True, pace=PACE) as load:
        # The baseline: Redis answering, items exhausted after 20.
        assert load.wait_for(limited_again(0.0), WAIT) is not None
        assert load.wait_count(lambda s: True, PHASE)
        kill_called = time.monotonic()
        redis_server.kill()
        killed = time.monotonic()
        assert load.wait_count(lambda s: s.started >= killed, PHASE), "requests stopped"
        start_called = time.monotonic()
        redis_server.start()
        started = time.monotonic()
        resumed = load.wait_for(limited_again(started), WAIT)
        login_resumed = load.wait_for(
            lambda s: s.kind == "login" and s.status == 400 and s.started >= started, WAIT
        )
    samples = load.stop()
    assert_never_an_error(samples)

    baseline = [s for s in samples if s.ended <= kill_called]
    down = between(samples, killed, start_called)
    assert sum(s.status == 429 and s.decided_by_redis for s in baseline) > 0  # exhausted
    assert_fail_modes(down)

    # Added latency while Redis is down, at p99, against the same load before the kill.
    # A killed server refuses connections at once and the breaker then skips it, so this
    # sits well under the timeout; the bound is the timeout plus SLACK (see there).
    base_p99 = p99([s.duration for s in baseline])
    down_p99 = p99([s.duration for s in down])
    print(f"\nkill: baseline p99 {ms(base_p99)}, down p99 {ms(down_p99)}, n={len(down)}")
    assert down_p99 - base_p99 <= timeout + SLACK, (ms(base_p99), ms(down_p99))

    assert resumed is not None, "items was not limited again once Redis was back"
    assert login_resumed is not None, "login did not pass again once Redis was back"
    print(f"kill: limiting resumed {ms(resumed - started)} after Redis started")


# --- SCRIPT FLUSH and FUNCTION FLUSH under load --------------------------------------------


@pytest.fixture(params=["SCRIPT FLUSH", "FUNCTION FLUSH"])
def flush_command(request: pytest.FixtureRequest, redis_client: redis.Redis) -> str:
    """What a drill flushes: the script cache (what Redis 6.2 runs; ignored by the function
    path) or the function libraries (what Redis 7+ runs)."""
    if request.param == "FUNCTION FLUSH":
        require_functions(redis_client)
    return str(request.param)


def load_under_flushes(
    redis_client: redis.Redis,
    command: str,
    limit: int,
    per_thread: int,
    interval: float | None,
) -> tuple[list[Sample], list[float]]:
    """``per_thread`` GETs from each thread at the fail-open ``items`` (``limit`` per hour)
    while another connection sends ``command`` (a flush) every ``interval`` seconds, or once
    when the load is under way (``None``). Returns the samples and when each flush ended.

    The load keeps pace with the flushes, however fast each runs: with ``interval``, a
    thread's request ``n`` waits until ``n`` flushes were sent, so every thread's requests
    are spread over the flushes; with one flush, each thread's second half waits for it."""
    Policy.objects.create(
        name="items", endpoint="api:items", algorithm="sliding_log", limit=limit, window=3600
    )
    flushed_at: list[float] = []
    flushed = threading.Condition()
    stop = threading.Event()

    def flush() -> None:
        while not stop.is_set():
            redis_client.execute_command(command)  # the test's connection, not the limiter's
            with flushed:
                flushed_at.append(time.monotonic())
                flushed.notify_all()
            if interval is None:
                return
            time.sleep(interval)

    def flushes_needed(n: int) -> int:
        if interval is None:
            return 1 if n >= per_thread // 2 else 0
        return n

    def gate(thread: int, n: int) -> None:
        needed = flushes_needed(n)
        with flushed:
            if not flushed.wait_for(lambda: len(flushed_at) >= needed, timeout=WAIT):
                raise AssertionError(f"flush {needed} was not sent within {WAIT} s")

    flusher = threading.Thread(target=flush, daemon=True)
    load = ClientLoad(get_items, max_requests=per_thread, warm=interval is None, gate=gate)
    load.start()
    if interval is None:  # some requests before the flush
        assert load.wait_for(lambda s: True, WAIT) is not None
    flusher.start()
    load.join()
    stop.set()
    flusher.join(timeout=WAIT)
    samples = load.stop()
    assert_never_an_error(samples)
    assert len(samples) == THREADS * per_thread
    return samples, list(flushed_at)


def test_one_flush_mid_load_is_recovered_exactly(
    redis_client: redis.Redis, flush_command: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Every thread finds the code gone after the flush; each loads it again and is
    decided by Redis. The policy fails open, so a request that was not recovered would
    pass uncounted: exactly ``limit`` passing shows that none fell back."""
    limit, per_thread = 40, 20
    samples, flushes = load_under_flushes(redis_client, flush_command, limit, per_thread, None)
    assert len(flushes) == 1
    # Flushed mid-load: requests were answered before it, and every thread sent half its
    # requests after it.
    assert any(s.ended < flushes[0] for s in samples)
    for thread in range(THREADS):
        after = [s for s in samples if s.thread == thread and s.started > flushes[0]]
        assert len(after) >= per_thread // 2, (thread, len(after))
    assert [s.status for s in samples].count(200) == limit - 2 * THREADS  # warm-up took 16
    assert all(s.decided_by_redis for s in samples)
    assert not [m for m in caplog.messages if "script failed" in m]


FLUSH_INTERVAL = 0.002


def test_flushed_repeatedly_mid_load_keeps_admission_exact(
    redis_client: redis.Redis, flush_command: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A flush every 2 ms, so a flush also lands between a thread's reload of the code
    and its retry: no error reaches a client, no request falls back to the fail mode
    (open here: it would pass uncounted), and exactly ``limit`` pass."""
    limit, per_thread = 60, 30
    samples, flushes = load_under_flushes(
        redis_client, flush_command, limit, per_thread, FLUSH_INTERVAL
    )
    # Flushed throughout, not once: each thread's request n was sent after flush n.
    assert len(flushes) >= per_thread - 1, len(flushes)
    for thread in range(THREADS):
        sent = sorted(s.started for s in samples if s.thread == thread)
        assert all(sent[n] > flushes[n - 1] for n in range(1, per_thread)), thread
    assert [s.status for s in samples].count(200) == limit
    assert all(s.decided_by_redis for s in samples)
    assert redis_client.zcard("rl:{ip:127.0.0.1}:items:log") == limit
    assert not [m for m in caplog.messages if "script failed" in m]


# --- Redis restarted empty under load -------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["sliding_log", "sliding_counter", "fixed_window"])
def test_redis_restarted_empty_mid_load_counts_afresh(
    algorithm: str, redis_server: RedisServer, redis_client: redis.Redis
) -> None:
    """Restarted empty (stopped, started) once the limit is used up: the new server counts
    from zero, exactly ``limit`` more pass."""
    limit = 30
    Policy.objects.create(
        name="items", endpoint="api:items", algorithm=algorithm, limit=limit, window=3600
    )
    wait_clear_of_window_boundary(3600, margin=10.0)
    with ClientLoad(get_items) as load:
        assert load.wait_for(lambda s: s.status == 429, WAIT) is not None
        restart_called = time.monotonic()
        redis_server.restart()
        # The old server had no slot left: a Redis-decided 200 now is the new server's.
        first = load.wait_for(
            lambda s: s.status == 200 and s.decided_by_redis and s.started >= restart_called,
            WAIT,
        )
        assert first is not None, "no request was admitted by the restarted Redis"
        again = load.wait_for(limited_again(first), WAIT)
    samples = load.stop()
    assert_never_an_error(samples)
    assert again is not None, "the limit was not reached again after the restart"

    admitted = [s for s in samples if s.status == 200 and s.decided_by_redis]
    # Exactly the limit before the restart and exactly the limit after it; requests that
    # met no Redis (fail open, no header) were counted nowhere. Each server's admissions
    # left limit-1, ..., 1, 0: the restarted one counted from zero, not from the old count.
    assert len(admitted) == 2 * limit
    assert sorted(s.remaining() for s in admitted) == sorted([*range(limit)] * 2)
    (key,) = redis_client.scan_iter(match="rl:{*}:items:*")
    assert len(key) <= keys.MAX_KEY_LENGTH
    print(
        f"\nrestart ({algorithm}): first admission {ms(first - restart_called)}, limit "
        f"reached again {ms(again - restart_called)} after restart() was called"
    )


# --- Redis slow: every client paused ----------------------------------------------------------


@contextmanager
def redis_held(how: str, redis_server: RedisServer, redis_client: redis.Redis) -> Iterator[None]:
    """Redis holds commands until the block ends. ``stopped``: the process is stopped
    (``SIGSTOP``), as a server stuck in a slow command: connections open, nothing answers.
    (``DEBUG SLEEP`` is disabled in Redis 7's default config, and ``CLIENT PAUSE ALL``
    would hold the ``CLIENT UNPAUSE`` that ends it too.) ``WRITE``: ``CLIENT PAUSE
    WRITE``: the decide calls wait, reads (the table's version check) answer."""
    if how == "stopped":
        assert redis_server.process is not None
        pid = redis_server.process.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)
    else:
        redis_client.execute_command("CLIENT", "PAUSE", int(10 * WAIT * 1000), how)
        try:
            yield
        finally:
            redis_client.execute_command("CLIENT", "UNPAUSE")


@pytest.mark.parametrize("how", ["stopped", "WRITE"])
def test_redis_paused_mid_load_takes_the_fail_mode_within_the_timeout(
    how: str,
    fail_policies: None,
    explicit_timeout: float,
    no_gc_pauses: None,
    redis_server: RedisServer,
    redis_client: redis.Redis,
) -> None:
    """Redis holds every decide call (:func:`redis_held`) until each thread has been
    answered without it: a request that waited for Redis would hold its thread until
    then. Meanwhile each policy's fail mode, within the timeout."""
    timeout = explicit_timeout
    with ClientLoad(items_and_login, warm=True, pace=PACE) as load:
        # The baseline: Redis answering, items exhausted after 20.
        assert load.wait_for(limited_again(0.0), WAIT) is not None
        assert load.wait_count(lambda s: True, PHASE)
        pause_called = time.monotonic()
        with redis_held(how, redis_server, redis_client):
            paused = time.monotonic()
            answered = load.wait_count(lambda s: s.started >= paused, PHASE)
            # Not hung: every request that started before now ends while Redis is held
            # (its thread sends another).
            now = time.monotonic()
            none_waiting = load.wait_every_thread(lambda s: s.started >= now)
            unpause_called = time.monotonic()
        unpaused = time.monotonic()
        resumed = load.wait_for(limited_again(unpaused), WAIT)
    samples = load.stop()
    assert answered, "requests stopped while Redis was held"
    assert none_waiting, "a request waited for Redis while it was held"
    assert_never_an_error(samples)

    baseline = [s for s in samples if s.ended <= pause_called]
    during = between(samples, paused, unpause_called)  # Redis decided none of them
    assert_fail_modes(during)

    # Within the timeout. One request may pay the timeout twice (the policy-table version
    # check, then the decide call, before the breaker opens), so the bound for the
    # slowest one is two timeouts plus the slack.
    slowest = max(s.duration for s in during)
    base_p99 = p99([s.duration for s in baseline])
    during_p99 = p99([s.duration for s in during])
    print(
        f"\npause {how}: baseline p99 {ms(base_p99)}, paused p99 {ms(during_p99)}, "
        f"slowest {ms(slowest)}, n={len(during)}"
    )
    slow = [(ms(s.started - paused), ms(s.duration)) for s in during if s.duration > timeout]
    assert during_p99 - base_p99 <= timeout + SLACK, slow
    assert slowest <= 2 * timeout + SLACK + base_p99, slow

    assert resumed is not None, "items was not limited again after the pause"
    print(f"pause {how}: limiting resumed {ms(resumed - unpaused)} after the pause ended")
