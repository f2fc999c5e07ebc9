"""Exact under concurrency: N clients at once against a limit L admit exactly L, while
the first of them race to write the policy (one row)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connections

from ratelimits.contrib.django_ratelimit import ratelimit
from ratelimits.models import Policy
from tests.contrib.django_ratelimit.views import request

N, LIMIT = 24, 7


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("patient_redis")
def test_threads_admit_exactly_the_limit() -> None:
    @ratelimit(group="race", key="ip", rate=f"{LIMIT}/h", block=False)
    def view(request: Any) -> bool:
        return bool(request.limited)

    start = threading.Barrier(N)

    def client(_: int) -> bool:
        try:
            start.wait()
            return view(request())
        finally:
            connections.close_all()

    with ThreadPoolExecutor(N) as pool:
        limited = list(pool.map(client, range(N)))
    assert limited.count(False) == LIMIT
    assert Policy.objects.filter(name__startswith="dr-race-").count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("patient_redis")
def test_coroutines_admit_exactly_the_limit() -> None:
    @ratelimit(group="race", key="ip", rate=f"{LIMIT}/h")
    async def view(request: Any) -> str:
        return "ok"

    async def clients() -> list[Any]:
        return await asyncio.gather(*(view(request()) for _ in range(N)))

    # On async_to_sync's loop, the ORM calls the decorator makes on first use run in this
    # thread (thread-sensitive), whose database connection the test run closes.
    answers = async_to_sync(clients)()
    assert answers.count("ok") == LIMIT
    assert all(a == "ok" or a.status_code == 429 for a in answers)
