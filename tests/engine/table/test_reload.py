"""The policy table's reload: built in a background thread while requests keep the table
held, swapped in when ready, also in the process that made the change; built in the
caller's thread only when there is no table to serve (the first load) or the worker was
idle.

The tests steer the table's source (:class:`Source`) and make a check due by moving the
clock of the last check back one interval; Redis is the test server.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync
from django.db import connection, connections

from ratelimits.conf import app_settings
from ratelimits.database import policy_source
from ratelimits.engine import denials, limiter
from ratelimits.engine.keys.names import version_key
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.table import current as table
from ratelimits.engine.table.cache import cache
from ratelimits.engine.table.keeper import THREAD_NAME, keeper
from ratelimits.models import Policy
from tests.helpers import IDENTITY, make_policy, policy, wait_until

#: Long enough that no check falls due unless a test makes it due.
INTERVAL = 30.0
BUILDER = THREAD_NAME
CALLER = threading.current_thread().name


class Source:
    """A policy source: one policy per name in ``names``, read when a build starts (as a
    database query would); ``failing`` makes it raise. :meth:`hold_next` makes the next
    build wait, after setting ``entered``, until the test lets it go."""

    def __init__(self, *names: str) -> None:
        self.names = list(names)
        self.failing = False
        #: The thread of each call, and of each release.
        self.calls: list[str] = []
        self.released: list[str] = []
        self.entered = threading.Event()
        self._hold: threading.Event | None = None

    def hold_next(self) -> threading.Event:
        self._hold = threading.Event()
        return self._hold

    def __call__(self) -> list[CompiledPolicy]:
        names, hold, self._hold = list(self.names), self._hold, None
        self.calls.append(threading.current_thread().name)
        if hold is not None:
            self.entered.set()
            hold.wait(10)
        if self.failing:
            raise RuntimeError("the database is down")
        return [policy("fixed_window", limit=1, window=3600, name=name) for name in names]

    def release(self) -> None:
        self.released.append(threading.current_thread().name)


@pytest.fixture
def source(settings) -> Iterator[Source]:
    settings.RATELIMITS = {
        **getattr(settings, "RATELIMITS", {}),
        "POLICY_REFRESH_INTERVAL": INTERVAL,
    }
    found = Source("a")
    table.set_source(found, found.release)
    yield found
    if found._hold is not None:
        found._hold.set()
    builds_done()


def names(found: table.PolicyTable | None) -> list[str]:
    assert found is not None
    return [p.name for p in found.policies]


def another_worker_changed_a_policy(redis_client) -> None:
    redis_client.set(version_key(app_settings.KEY_PREFIX), uuid.uuid4().hex)


def check_due(intervals: float = 1.0) -> None:
    """Date this worker's last check ``intervals`` intervals back (1: a check is due now;
    more than 2: the worker was idle)."""
    with cache.lock:
        cache.checked_at = time.monotonic() - intervals * INTERVAL


def builds_done() -> None:
    assert keeper.wait_idle(10)


def test_the_first_table_is_built_by_the_first_request(source):
    assert names(table.get_table()) == ["a"]
    assert source.calls == [CALLER]
    assert source.released == []


def deny() -> None:
    """A client over policy ``a``'s limit, whose denial this worker remembers."""
    limited = policy("fixed_window", limit=1, window=3600, name="a")
    for _ in range(2):
        limiter.decide([limiter.Check(limited, IDENTITY)])
    assert denials.size() == 1


def test_requests_keep_the_table_while_a_new_one_builds_then_get_it(source, redis_client):
    old = table.get_table()
    deny()
    source.names = ["b"]
    hold = source.hold_next()
    another_worker_changed_a_policy(redis_client)
    check_due()
    assert table.get_table() is old  # it handed the check over, and did not wait for it
    assert source.entered.wait(10)
    # Counters may have been reset: the denials went when the check read the stamp,
    # before the new table is ready.
    assert denials.size() == 0
    check_due()
    assert table.get_table() is old  # a build is under way: neither waits nor starts one
    assert source.calls == [CALLER, BUILDER]
    deny()  # remembered while the old table is served: it goes with it
    hold.set()
    builds_done()
    assert names(table.get_table()) == ["b"]
    assert denials.size() == 0
    assert source.calls == [CALLER, BUILDER]
    assert source.released == [BUILDER]


def test_a_due_check_reads_the_stamp_in_the_keeper_thread_not_the_requests(
    source, redis_client, settings
):
    """The request that finds a check due hands it over and is served at once: with
    Redis holding every command for 2 s (within the socket timeout), it returns the table
    held while the keeper still waits for the stamp; the change is built once Redis
    answers."""
    settings.RATELIMITS = {**settings.RATELIMITS, "SOCKET_TIMEOUT": 10}
    old = table.get_table()
    source.names = ["b"]
    another_worker_changed_a_policy(redis_client)
    check_due()
    redis_client.execute_command("CLIENT", "PAUSE", 2000, "ALL")
    try:
        started = time.monotonic()
        assert table.get_table() is old
        assert time.monotonic() - started < 1.0  # Redis answered nothing meanwhile
        assert not keeper.wait_idle(0)  # the keeper is still waiting for Redis
        assert table.get_table() is old  # and the next request is not held either
    finally:
        redis_client.execute_command("CLIENT", "UNPAUSE")
    builds_done()
    assert names(table.get_table()) == ["b"]
    assert source.calls == [CALLER, BUILDER]


def test_many_requests_during_a_build_start_no_other(source, redis_client):
    old = table.get_table()
    hold = source.hold_next()
    another_worker_changed_a_policy(redis_client)
    check_due()
    table.get_table()
    assert source.entered.wait(10)
    served = []

    def request() -> None:
        check_due()
        served.append(table.get_table())

    threads = [threading.Thread(target=request) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert served == [old] * 8
    assert source.calls == [CALLER, BUILDER]
    hold.set()


def test_a_failed_build_keeps_the_table_and_the_next_check_tries_again(
    source, redis_client, caplog
):
    old = table.get_table()
    source.names, source.failing = ["b"], True
    another_worker_changed_a_policy(redis_client)
    check_due()
    with caplog.at_level(logging.WARNING, logger="ratelimits"):
        assert table.get_table() is old
        builds_done()
    assert "could not rebuild the policy table (RuntimeError: the database is down)" in (
        caplog.text
    )
    assert table.get_table() is old
    assert source.released == [BUILDER]
    source.failing = False
    check_due()
    assert table.get_table() is old
    builds_done()
    assert names(table.get_table()) == ["b"]
    assert source.calls == [CALLER, BUILDER, BUILDER]


def test_a_change_made_in_this_process_is_built_in_the_background(source, redis_client):
    """The writer (``mark_changed()`` runs after its commit) serves its next requests the
    table held while the new one builds, and its check after the swap builds nothing:
    the stamp it wrote is the one its new table holds."""
    old = table.get_table()
    deny()
    source.names = ["b"]
    hold = source.hold_next()
    table.mark_changed()
    assert denials.size() == 0
    assert table.get_table() is old  # the writer's next request: no build on its thread
    assert source.entered.wait(10)
    check_due()
    assert table.get_table() is old  # its check: a build is under way, nothing waits
    assert source.calls == [CALLER, BUILDER]
    hold.set()
    builds_done()
    assert names(table.get_table()) == ["b"]
    check_due()
    assert names(table.get_table()) == ["b"]
    builds_done()
    assert source.calls == [CALLER, BUILDER]
    assert source.released == [BUILDER]


def test_a_change_during_a_build_is_built_after_it(source, redis_client):
    """A build under way may have read the source before this process's change: another
    build follows it, in the same thread, and its table is the one served."""
    old = table.get_table()
    source.names = ["b"]
    hold = source.hold_next()
    another_worker_changed_a_policy(redis_client)
    check_due()
    table.get_table()
    assert source.entered.wait(10)  # building ["b"]
    source.names = ["c"]
    table.mark_changed()
    table.mark_changed()  # a second change before either build ended: one more build
    assert table.get_table() is old
    hold.set()
    builds_done()
    assert names(table.get_table()) == ["c"]
    assert source.calls == [CALLER, BUILDER, BUILDER]
    assert source.released == [BUILDER]


def test_a_change_with_no_table_held_is_built_by_the_next_request(source, redis_client):
    source.names = ["b"]
    table.mark_changed()
    assert names(table.get_table()) == ["b"]
    assert source.calls == [CALLER]


def test_a_build_that_hangs_past_max_age_is_given_up(source, redis_client):
    old = table.get_table()
    source.names = ["b"]
    hold = source.hold_next()
    another_worker_changed_a_policy(redis_client)
    check_due()
    table.get_table()
    assert source.entered.wait(10)
    with cache.lock:
        cache.building_since -= float(app_settings.POLICY_MAX_AGE)
    source.names = ["c"]
    check_due()
    assert table.get_table() is old
    wait_until(lambda: cache.table is not old, what="the new table swapped in")
    assert names(table.get_table()) == ["c"]
    hold.set()
    builds_done()
    assert names(table.get_table()) == ["c"]


def test_an_idle_worker_rebuilds_before_serving(source, redis_client, caplog):
    table.get_table()
    source.names = ["b"]
    another_worker_changed_a_policy(redis_client)
    check_due(intervals=3)  # its table may be any age: it is not served meanwhile
    assert names(table.get_table()) == ["b"]
    assert source.calls == [CALLER, CALLER]
    source.names, source.failing = ["c"], True
    another_worker_changed_a_policy(redis_client)
    check_due(intervals=3)
    with caplog.at_level(logging.WARNING, logger="ratelimits"):
        assert names(table.get_table()) == ["b"]
    assert "could not rebuild the policy table" in caplog.text


def test_requests_during_an_idle_workers_rebuild_wait_for_it(source, redis_client):
    """Threads: a request that comes while an idle worker's table is rebuilt waits for
    the new table; it is not served the old one, of any age, meanwhile."""
    table.get_table()
    source.names = ["b"]
    hold = source.hold_next()
    another_worker_changed_a_policy(redis_client)
    check_due(intervals=3)
    served: list[table.PolicyTable] = []
    first = threading.Thread(target=lambda: served.append(table.get_table()))
    first.start()
    assert source.entered.wait(10)  # the first request rebuilds
    second = threading.Thread(target=lambda: served.append(table.get_table()))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waiting for the rebuild
    hold.set()
    first.join(10)
    second.join(10)
    assert [names(found) for found in served] == [["b"], ["b"]]


def test_a_coroutine_hands_a_due_check_over_from_the_loop(source, redis_client, monkeypatch):
    """:func:`table.aget_table` with a check due: handed to the keeper thread from the
    event loop, with no hop to a worker thread; the change is built there."""
    old = table.get_table()
    source.names = ["b"]
    another_worker_changed_a_policy(redis_client)
    check_due()

    def no_thread(*args, **kwargs):
        raise AssertionError("the coroutine hopped to a worker thread")

    monkeypatch.setattr(table, "sync_to_async", no_thread)
    assert async_to_sync(table.aget_table)() is old
    builds_done()
    assert names(async_to_sync(table.aget_table)()) == ["b"]
    assert source.calls == [CALLER, BUILDER]


def test_coroutines_during_an_idle_workers_rebuild_wait_for_it(source, redis_client):
    """:func:`table.aget_table`, as an async view's requests call it on one event loop:
    those that come while an idle worker's table is rebuilt get the new table."""
    table.get_table()
    source.names = ["b"]
    hold = source.hold_next()
    another_worker_changed_a_policy(redis_client)
    check_due(intervals=3)

    async def requests() -> tuple[list[str], list[str], bool]:
        first = asyncio.create_task(table.aget_table())
        while not source.entered.is_set():
            await asyncio.sleep(0.005)
        second = asyncio.create_task(table.aget_table())
        await asyncio.sleep(0.1)
        waited = not second.done()
        hold.set()
        return names(await first), names(await second), waited

    first, second, waited = async_to_sync(requests)()
    assert first == second == ["b"]
    assert waited


def test_a_source_only_the_request_thread_can_read_is_read_there(source, redis_client):
    table.set_source(source, source.release, in_background=False)
    table.get_table()
    source.names = ["b"]
    another_worker_changed_a_policy(redis_client)
    check_due()
    assert names(table.get_table()) == ["b"]
    assert source.calls == [CALLER, CALLER]


@pytest.mark.django_db(transaction=True)
def test_the_database_is_read_in_the_background_on_a_connection_closed_after(
    settings, redis_client
):
    settings.RATELIMITS = {
        **getattr(settings, "RATELIMITS", {}),
        "POLICY_REFRESH_INTERVAL": INTERVAL,
    }
    open_after: list[bool] = []

    def release() -> None:
        policy_source.close_connections()
        open_after.append(any(c.connection for c in connections.all(initialized_only=True)))

    table.set_source(policy_source.load, release)
    make_policy("a")
    old = table.get_table()
    with connection.cursor() as cursor:  # another worker's edit: no signal in this process
        cursor.execute("UPDATE ratelimits_policy SET name = 'b' WHERE name = 'a'")
    assert Policy.objects.get().name == "b"
    another_worker_changed_a_policy(redis_client)
    check_due()
    assert table.get_table() is old
    builds_done()
    assert names(table.get_table()) == ["b"]
    assert open_after == [False]


class Gated:
    """The database source, whose builds wait while the test holds the gate closed."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.entered = threading.Event()
        self._open = threading.Event()
        self._open.set()

    def close(self) -> None:
        self.entered.clear()
        self._open.clear()

    def open(self) -> None:
        self._open.set()

    def __call__(self) -> Iterator[CompiledPolicy]:
        self.calls.append(threading.current_thread().name)
        self.entered.set()
        assert self._open.wait(10)
        return policy_source.load()


def admitted(found: table.PolicyTable, times: int) -> list[bool]:
    """Whether each of ``times`` requests on ``api:a`` is admitted, matched in ``found``."""
    policies = found.match(method="GET", path="/a/", url_name="api:a")
    return [
        limiter.decide([limiter.Check(p, IDENTITY) for p in policies]).allowed for _ in range(times)
    ]


@pytest.mark.django_db(transaction=True)
def test_the_writer_serves_the_table_held_until_its_change_is_built(settings, redis_client):
    """A worker that saves a policy (the announcement runs after the commit) answers its
    next requests from the table held while the new one builds in the background, not
    from a build on the request's thread; the change holds once it is swapped in."""
    settings.RATELIMITS = {
        **getattr(settings, "RATELIMITS", {}),
        "POLICY_REFRESH_INTERVAL": INTERVAL,
    }
    gated = Gated()
    table.set_source(gated, policy_source.close_connections)
    saved = make_policy("a", limit=1, window=3600)
    old = table.get_table()
    gated.close()
    saved.limit = 3
    saved.save()  # autocommit: committed, then announced
    assert gated.entered.wait(10)  # the build is under way, held at the gate
    assert admitted(table.get_table(), 2) == [True, False]  # the old limit, 1
    assert table.get_table() is old
    gated.open()
    builds_done()
    new = table.get_table()
    assert new.get("a").limit == 3
    assert admitted(new, 3) == [True, True, False]  # 3 now, one of them spent before
    assert gated.calls == [CALLER, BUILDER]
