"""Exact admission on the async path end to end: the demo site under uvicorn, 2 workers.

The demo's ``GET /hello/`` is an async view under ``RateLimitMiddleware``; under an ASGI
server Django runs the middleware chain on the event loop, so the middleware decides in
``aprocess_view`` with ``adecide`` (``redis.asyncio`` connections, no thread). 400 GETs
from 16 concurrent HTTP clients, released together, at a limit of 50 per 60 s keyed by
IP (every client is 127.0.0.1): each algorithm admits exactly 50, twice in a row.

Every request is accounted for by the workers' Prometheus metrics (merged through
``PROMETHEUS_MULTIPROC_DIR``): each was decided by Redis or by a denial the worker
remembered, none by a fail mode, and Redis ran exactly one decide call per request
decided there.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest
import redis
from asgiref.sync import iscoroutinefunction
from django.core.handlers.asgi import ASGIHandler
from prometheus_client.parser import text_string_to_metric_families

from project.pages.views import hello
from ratelimits.conf import app_settings
from ratelimits.engine.reporting.observers import SOURCES
from ratelimits.middleware import RateLimitMiddleware
from ratelimits.models import Policy
from ratelimits.testutils import free_port
from ratelimits.tools import inventory
from tests.helpers import decide_calls, wait_clear_of_window_boundary
from tests.served import (
    Site,
    announce_new_version,
    fire,
    get,
    serve,
    site_env,
    statuses,
    uvicorn_command,
    wait_for_policy,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WORKERS = 2
CLIENTS = 16
REQUESTS = 400
LIMIT = 50
WINDOW = 60
RUNS = 2
#: Runs again, at most, of a fixed window's run that a slow machine took past the
#: window's end (its counts are then two windows' and prove nothing).
RERUNS = 3
PATH = "/hello/"


@pytest.fixture(scope="module")
def site(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """``uvicorn project.asgi`` on a free port of 127.0.0.1, on the tests' database and
    Redis, its workers' metrics merged from a directory of their own."""
    port = free_port()
    where = tmp_path_factory.mktemp("uvicorn")
    metrics = where / "metrics"
    metrics.mkdir()
    env = site_env(PROMETHEUS_MULTIPROC_DIR=str(metrics))
    with serve(uvicorn_command(port, WORKERS), port, where / "uvicorn.log", env, "uvicorn") as site:
        yield site


def decided(site: Site) -> dict[str, int]:
    """Requests every worker decided so far, by where the answer came from (``redis``,
    ``local``, ``fallback``): the count of ``ratelimits_decision_seconds``."""
    reply = get(site.port, "/ratelimits/metrics/")
    assert reply.status == 200, reply.body[:500]
    found = dict.fromkeys(SOURCES, 0)
    for family in text_string_to_metric_families(reply.body.decode()):
        for sample in family.samples:
            if sample.name == "ratelimits_decision_seconds_count":
                found[sample.labels["source"]] += int(sample.value)
    return found


def test_the_demo_decides_async_views_on_the_event_loop() -> None:
    """Under ASGI the demo's middleware chain is async all the way down, so Django keeps
    RateLimitMiddleware's coroutine hook (no thread around it); /hello/ is a coroutine."""
    handler = ASGIHandler()  # loads settings.MIDDLEWARE (the demo's) for an async chain
    hooks = [getattr(hook, "__func__", None) for hook in handler._view_middleware]
    assert RateLimitMiddleware.aprocess_view in hooks
    assert RateLimitMiddleware.process_view not in hooks
    assert iscoroutinefunction(hello)


@pytest.mark.parametrize("algorithm", ["sliding_log", "compact_log", "fixed_window"])
def test_exactly_the_limit_is_admitted(
    site: Site, redis_client: redis.Redis, algorithm: str
) -> None:
    """400 GETs of the async view from 16 clients into 2 processes at 50 per 60 s:
    exactly 50 pass, twice; every request decided once, none by a fail mode."""
    name = f"asgi-{algorithm}"
    Policy.objects.create(
        name=name,
        endpoint="hello",
        methods="GET",
        algorithm=algorithm,
        limit=LIMIT,
        window=WINDOW,
        key="ip",
    )
    announce_new_version(redis_client)
    time.sleep(float(app_settings.POLICY_REFRESH_INTERVAL) + 0.2)
    expected_header = f'"{name}";q={LIMIT};w={WINDOW}'
    wait_for_policy(site, PATH, expected_header)

    counts = []
    for _ in range(RUNS + RERUNS):
        inventory.reset(redis_client, name)
        # The workers forget the last run's remembered denials within one refresh interval.
        time.sleep(float(app_settings.POLICY_REFRESH_INTERVAL) + 0.2)
        if algorithm == "fixed_window":  # a clock-aligned window
            wait_clear_of_window_boundary(WINDOW, margin=5.0)
        window = time.time() // WINDOW
        calls_before, sources_before = decide_calls(redis_client), decided(site)
        started = time.monotonic()
        replies = fire(site.port, PATH, CLIENTS, REQUESTS)
        elapsed = time.monotonic() - started
        calls = decide_calls(redis_client) - calls_before
        sources = {k: v - sources_before[k] for k, v in decided(site).items()}
        found = statuses(replies)
        print(f"\n{algorithm}: {found} in {elapsed:.2f} s; {sources}, {calls} calls", end="")
        # Every worker decided with this policy, and every admitted request ran the view.
        assert {r.policy_header for r in replies} == {expected_header}, (
            Counter((r.policy_header, r.status) for r in replies),
            site.output(),
        )
        assert {r.body for r in replies if r.status == 200} == {b'{"hello": "stranger"}'}
        assert sources["fallback"] == 0, sources
        assert sources["redis"] + sources["local"] == REQUESTS, sources
        assert calls == sources["redis"], (calls, sources)
        if algorithm == "fixed_window" and time.time() // WINDOW != window:
            print(" (ran into the next window: again)", end="")  # a slow machine
            continue
        counts.append(found)
        if len(counts) == RUNS:
            break
    assert counts == [{200: LIMIT, 429: REQUESTS - LIMIT}] * RUNS
