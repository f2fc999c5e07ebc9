"""Guarantees across worker processes: propagation of edits and exact admission."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ratelimits.models import Policy
from tests.helpers import start_worker, wait_clear_of_window_boundary, worker_line

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_an_edit_reaches_another_process_within_the_bound():
    policy = Policy.objects.create(
        name="search", endpoint="search", algorithm="sliding_counter", limit=5, window=60
    )
    worker = start_worker("watch", "search", "30")
    try:
        assert worker_line(worker)[0] == "5"
        policy.limit = 7
        policy.save()
        assert worker_line(worker, time.monotonic())[0] == "7"
        Policy.objects.filter(pk=policy.pk).update(limit=9)  # no post_save for update()
        assert worker_line(worker, time.monotonic())[0] == "9"
        policy.delete()
        assert worker_line(worker, time.monotonic())[0] == "-"
    finally:
        worker.kill()
        worker.wait()


def test_an_edit_after_redis_lost_its_data_still_reaches_other_processes(redis_client):
    """The version stamp is random: a flushed Redis cannot hand a worker a stamp it holds."""
    policy = Policy.objects.create(
        name="search", endpoint="search", algorithm="sliding_counter", limit=5, window=60
    )
    worker = start_worker("watch", "search", "30")
    try:
        assert worker_line(worker)[0] == "5"
        time.sleep(1.5)  # the worker has checked the stamp since
        redis_client.flushall()
        policy.limit = 7
        policy.save()
        assert worker_line(worker, time.monotonic())[0] == "7"
    finally:
        worker.kill()
        worker.wait()


@pytest.mark.parametrize("algorithm", ["sliding_log", "fixed_window", "sliding_counter"])
def test_threads_in_two_processes_admit_exactly_the_limit(algorithm):
    """400 requests from 2 processes x 8 threads at a limit of 50: exactly 50 pass."""
    Policy.objects.create(
        name="items", endpoint="api:items", algorithm=algorithm, limit=50, window=3600, key="ip"
    )
    wait_clear_of_window_boundary(3600, margin=5.0)
    start = time.time() + 2.0
    workers = [start_worker("hammer", "/api/items/", "8", "25", str(start)) for _ in range(2)]
    totals: dict[str, int] = {}
    for worker in workers:
        out, _ = worker.communicate(timeout=120)
        for status, n in json.loads(out).items():
            totals[status] = totals.get(status, 0) + n
    assert totals == {"200": 50, "429": 350}
