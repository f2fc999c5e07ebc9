"""The minimal ACL of ``docs/redis.md``, read from the page, on a real server: a user with
exactly that line runs the limiter (sync and async, the DRF throttle and the middleware),
the policy table, the statistics, the ``ratelimits`` command's ``keys``, ``inspect`` and
``reset``, and passes the deploy check; and loses nothing after a ``FUNCTION FLUSH``."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.test import AsyncClient

from ratelimits.engine.reporting import stats
from ratelimits.models import Policy
from ratelimits.testutils import RedisServer, reset_state
from ratelimits.tools.diagnostics import acl as access
from tests.helpers import caches_at, server_major
from tests.wheel import REPO

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.urls")]

PASSWORD = "acl-doc-secret"


def documented_acl(major: int) -> list[str]:
    """The ``ACL SETUSER`` line of docs/redis.md, split; Redis 6.2's without Functions."""
    text = (REPO / "docs" / "redis.md").read_text(encoding="utf-8")
    (line,) = [line for line in text.splitlines() if line.startswith("ACL SETUSER ratelimits ")]
    words = line.replace("CHANGE-ME", PASSWORD).split()
    if major < 7:  # as the page says
        words = [w for w in words if w not in ("+fcall", "+fcall_ro", "+function|load")]
    return words


@pytest.fixture
def acl_user(settings: Any) -> Iterator[RedisServer]:
    with RedisServer() as server:
        admin = server.client()
        admin.execute_command(*documented_acl(server_major(admin)))
        location = f"redis://ratelimits:{PASSWORD}@127.0.0.1:{server.port}/0"
        settings.CACHES = {"default": {**caches_at(server.port)["default"], "LOCATION": location}}
        reset_state()
        yield server


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("ratelimits", *args, stdout=out)
    return out.getvalue()


def test_the_documented_acl_is_enough_for_the_limiter_and_the_tools(client, acl_user, caplog):
    for name, endpoint in (("api", "api:items"), ("mw", "sync"), ("aio", "async")):
        Policy.objects.create(
            name=name, endpoint=endpoint, algorithm="sliding_log", limit=2, window=3600,
            key="ip", fail_open=False,
        )  # fmt: skip

    async def on_async() -> list[int]:
        async_client = AsyncClient()
        return [(await async_client.get("/async/")).status_code for _ in range(3)]

    with caplog.at_level(logging.WARNING, logger="ratelimits"):
        assert [client.get("/api/items/").status_code for _ in range(3)] == [200, 200, 429]
        assert [client.get("/sync/").status_code for _ in range(3)] == [200, 200, 429]
        assert async_to_sync(on_async)() == [200, 200, 429]
        admin = acl_user.client()
        if server_major(admin) >= 7:
            admin.function_flush()
        admin.script_flush()
        Policy.objects.get(name="mw").save()  # a change: the table's stamp is written
        again = client.get("/sync/", REMOTE_ADDR="198.51.100.9")
        assert again.status_code == 200 and "RateLimit" in again  # the code loaded again
        assert stats.flush()
    assert [r for r in caplog.records if r.name == "ratelimits"] == []
    assert admin.keys("rl:stats:*") and admin.exists("rl:policies:version")

    listed = json.loads(run("keys", "--json"))
    keys = [row["key"] for row in listed]
    assert "rl:{ip:127.0.0.1}:api:log" in keys
    assert all(row["memory"] for row in listed), listed  # MEMORY USAGE answered
    shown = json.loads(run("inspect", "rl:{ip:127.0.0.1}:api:log", "--json"))
    assert shown["key"] == "rl:{ip:127.0.0.1}:api:log"
    if server_major(admin) >= 7:  # the look is FCALL_RO of the no-writes function
        assert admin.info("commandstats")["cmdstat_fcall_ro"]["calls"] >= 1
    run("reset", "--policy", "api", "--yes")
    assert not admin.exists("rl:{ip:127.0.0.1}:api:log")

    found = [(f.code, f.message) for f in access.check()]
    assert [code for code, _ in found] == ["I036"], found
    assert "user 'ratelimits'" in found[0][1]  # judged by harmless calls: no ACL DRYRUN
