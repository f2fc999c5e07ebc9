"""A policy edited while 8 threads send requests: the edit holds in the editing process
once its table is swapped in, and in another worker once it sees the version stamp;
never a 500."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from django.db import connection
from django.test import Client

from ratelimits.conf import app_settings
from ratelimits.engine.keys import names as keys
from ratelimits.engine.table.cache import cache
from ratelimits.models import Policy
from tests.engine.store.drills.traffic import (
    ITEMS,
    THREADS,
    WAIT,
    ClientLoad,
    Sample,
    assert_never_an_error,
    between,
    get_items,
    ms,
)

pytestmark = pytest.mark.django_db(transaction=True)


# --- A policy edited while 8 threads send requests ----------------------------------------


def other_worker_edits(redis_client: redis.Redis, policy: Policy, column: str, value: Any) -> bytes:
    """What another web worker's edit looks like to this one: a committed row (written
    here without this process's signals) and a new version stamp in Redis, returned."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE ratelimits_policy SET {column} = %s WHERE id = %s", [value, policy.pk]
        )
    stamp = uuid.uuid4().hex  # any new value: workers compare the stamp for equality
    redis_client.set(keys.version_key(app_settings.KEY_PREFIX), stamp)
    return stamp.encode()


def swapped_in(stamp: bytes) -> float:
    """Wait until this process serves the table built for ``stamp`` (checked, built in
    the background and swapped in: table and stamp are set together); when it was seen."""
    deadline = time.monotonic() + WAIT
    while cache.version != stamp:
        assert time.monotonic() < deadline, f"no table for the new stamp within {WAIT} s"
        time.sleep(0.005)
    return time.monotonic()


@dataclass(frozen=True)
class Edit:
    """An edit of the ``items`` policy and what must hold once it is in force."""

    limit: int  # the limit before the edit
    change: Callable[[Policy], Any]
    expected: str


def update(**values: Any) -> Callable[[Policy], Any]:
    """An edit through a queryset ``update()``, as the admin's bulk actions make it."""
    return lambda policy: Policy.objects.filter(pk=policy.pk).update(**values)


def save(**values: Any) -> Callable[[Policy], Any]:
    """An edit through ``save()``, as the admin's change form and list edits make it."""

    def change(policy: Policy) -> None:
        for field, value in values.items():
            setattr(policy, field, value)
        policy.save()

    return change


EDITS: dict[str, Edit] = {
    "limit raised": Edit(20, save(limit=100_000), "open"),
    "limit lowered": Edit(100_000, save(limit=5), "closed"),
    "algorithm changed": Edit(20, save(algorithm="sliding_counter"), "fresh"),
    "shadow mode": Edit(20, update(mode="shadow"), "shadow"),
    "disabled": Edit(20, update(enabled=False), "gone"),
    "deleted": Edit(20, lambda policy: policy.delete(), "gone"),
}


@pytest.mark.parametrize("name", EDITS)
def test_a_policy_edited_under_load(name: str, redis_client: redis.Redis) -> None:
    """The edit is made in this process, as the admin makes it: the editing process
    starts building its new table after the commit, in the background, and serves the
    one it holds meanwhile; every request that starts once the new table is swapped in
    (far inside ``POLICY_REFRESH_INTERVAL``) is decided by the new setting, and none gets
    a 500 meanwhile."""
    edit = EDITS[name]
    policy = Policy.objects.create(
        name="items", endpoint="api:items", algorithm="sliding_log", limit=edit.limit, window=3600
    )
    with ClientLoad(get_items) as load:
        if edit.limit < 100:
            assert load.wait_for(lambda s: s.status == 429, WAIT) is not None
        else:
            counted = load.wait_for(
                lambda s: s.decided_by_redis and s.remaining() < edit.limit - 30, WAIT
            )
            assert counted is not None
        change_called = time.monotonic()
        edit.change(policy)
        edited = swapped_in(redis_client.get(keys.version_key(app_settings.KEY_PREFIX)))
        assert load.wait_count(lambda s: s.started >= edited, 20)
        if edit.expected == "fresh":  # until the new key is used up
            assert load.wait_for(lambda s: s.started >= edited and s.status == 429, WAIT)
    samples = load.stop()
    assert_never_an_error(samples)
    before = [s for s in samples if s.ended <= change_called]
    after = [s for s in samples if s.started >= edited]
    if edit.limit < 100:  # (the last admissions may still be on their way back)
        assert edit.limit - THREADS <= sum(s.status == 200 for s in before) <= edit.limit
    else:
        assert {s.status for s in before} == {200}
    assert len(after) >= 20
    if edit.expected == "fresh":  # the first limit's admissions, then the new key's
        assert sum(s.status == 200 for s in samples) == 2 * edit.limit
    assert_new_setting_holds(edit.expected, after, redis_client)
    print(f"\n{name}: in force in the editing process {ms(edited - change_called)} after")


def assert_new_setting_holds(expected: str, after: list[Sample], redis_client: redis.Redis) -> None:
    """``after`` (requests made once the edit is in force) show what ``expected`` says."""
    statuses = [s.status for s in after]
    assert all(s.status in (200, 429) for s in after)
    if expected == "open":  # the raised limit admits everything; the counts were kept
        assert set(statuses) == {200}
        assert all(s.decided_by_redis and s.remaining() < 100_000 - 20 for s in after)
    elif expected == "closed":  # more than 5 already counted: the lowered limit denies
        assert set(statuses) == {429}
        assert all(s.decided_by_redis and s.remaining() == 0 for s in after)
    elif expected == "fresh":  # the new algorithm counts in a new key, from zero
        assert 429 in statuses
        assert all(s.decided_by_redis for s in after)
        assert len(list(redis_client.scan_iter(match="rl:{*}:items:counter"))) == 1
    elif expected == "shadow":
        assert set(statuses) == {200}
        assert all(s.ratelimit and s.ratelimit.startswith('"items";r=0;') for s in after)
    else:  # disabled or deleted: not limited, no header
        assert set(statuses) == {200}
        assert not any(s.ratelimit for s in after)


def test_an_edit_by_another_worker_holds_once_its_stamp_is_seen(
    redis_client: redis.Redis,
) -> None:
    """Another worker's edits reach this process through the version stamp, under load:
    the table built for the new stamp is swapped in, and every request that starts from
    then on sees the edit. (That a check falls due every ``POLICY_REFRESH_INTERVAL`` and
    starts the build is tests/engine/table/test_reload.py's, on a moved clock; here the
    time it took is printed.)"""
    limit = 20
    policy = Policy.objects.create(
        name="items", endpoint="api:items", algorithm="sliding_log", limit=limit, window=3600
    )
    with ClientLoad(get_items) as load:
        assert load.wait_for(lambda s: s.status == 429, WAIT) is not None
        shadow_called = time.monotonic()
        shadowed = swapped_in(other_worker_edits(redis_client, policy, "mode", "shadow"))
        assert load.wait_count(lambda s: s.started >= shadowed, 20)
        disable_called = time.monotonic()
        disabled = swapped_in(other_worker_edits(redis_client, policy, "enabled", False))
        assert load.wait_count(lambda s: s.started >= disabled, 20)
    samples = load.stop()
    assert_never_an_error(samples)
    shadow_phase = between(samples, shadowed, disable_called)
    disabled_phase = [s for s in samples if s.started >= disabled]
    assert len(shadow_phase) >= 20 and len(disabled_phase) >= 20
    assert_new_setting_holds("shadow", shadow_phase, redis_client)
    assert_new_setting_holds("gone", disabled_phase, redis_client)
    interval = float(app_settings.POLICY_REFRESH_INTERVAL)
    print(
        f"\nother worker: shadow in force {ms(shadowed - shadow_called)}, disabled "
        f"{ms(disabled - disable_called)} after the edit (interval {ms(interval)})"
    )


class CommitBeforeLine:
    """A tracer for ``get_table()`` that commits a policy change (``mark_changed()``, as
    another thread's commit would) just before the ``k``-th line it runs, if the table
    lock is free then (where it is held, another thread's commit would wait)."""

    def __init__(self, k: int) -> None:
        from ratelimits.engine.table import current as table

        self.k = k
        self.lines = 0
        self.committed = False
        self._policy_table = table
        self._lookup = table.get_table.__code__

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        return self._line if frame.f_code is self._lookup else None

    def _line(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            self.lines += 1
            lock = cache.lock
            if self.lines == self.k and lock.acquire(blocking=False):
                lock.release()
                self.committed = True
                self._policy_table.mark_changed()
        return self._line


def test_an_edit_committed_at_any_point_of_the_table_lookup_is_not_a_500() -> None:
    """The race the load drills hit only by chance, made deterministic: a commit lands
    before each line of a request's ``get_table()`` in turn. (Before the table was read
    once, a commit between the freshness check and the read made it return None: a 500.)"""
    Policy.objects.create(
        name="items", endpoint="api:items", algorithm="sliding_log", limit=1000, window=60
    )
    client = Client(raise_request_exception=False)
    commits = 0
    for k in range(1, 100):
        assert client.get(ITEMS).status_code == 200  # the table is loaded and fresh again
        tracer = CommitBeforeLine(k)
        sys.settrace(tracer)
        try:
            response = client.get(ITEMS)
        finally:
            sys.settrace(None)
        assert response.status_code == 200, f"a commit before line {k} of get_table()"
        assert response["RateLimit"].startswith('"items";r=')
        commits += tracer.committed
        if tracer.lines < k:  # every line of the lookup has had its commit
            break
    assert commits >= 2
