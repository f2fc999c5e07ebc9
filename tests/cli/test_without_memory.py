"""The ``ratelimits`` command as an ACL user who may not run ``MEMORY`` (some managed
services forbid it): ``inspect`` shows the key with its memory unknown, ``keys`` does not
say "0 bytes"; and an error reply is named for what it is (a permission refused, a full
Redis), "did not answer" kept for a Redis that did not. Real servers, real ACL users."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from ratelimits.engine import limiter
from ratelimits.engine.policy.compiled import Check, CompiledPolicy
from ratelimits.models import Policy
from ratelimits.testutils import RedisServer, reset_state
from tests.helpers import caches_at

pytestmark = pytest.mark.django_db

KEY = "rl:{ip:203.0.113.7}:items:log"


@pytest.fixture
def server(settings: Any) -> Iterator[RedisServer]:
    with RedisServer() as found:
        settings.CACHES = caches_at(found.port)
        reset_state()
        row = Policy.objects.create(
            name="items", endpoint="api:items", algorithm="sliding_log", limit=5, window=3600,
            key="ip",
        )  # fmt: skip
        limiter.decide([Check(CompiledPolicy.from_model(row), "ip:203.0.113.7")])
        yield found


def as_user(settings: Any, server: RedisServer, *rules: str) -> None:
    server.client().execute_command("ACL", "SETUSER", "app", "reset", "on", ">pw", "~*", *rules)
    location = f"redis://app:pw@127.0.0.1:{server.port}/0"
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": location}}
    reset_state()


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("ratelimits", *args, stdout=out)
    return out.getvalue()


def test_inspect_and_keys_without_memory(server, settings):
    as_user(settings, server, "+@all", "-memory")
    shown = run("inspect", KEY)
    assert "count" in shown and "memory     unknown" in shown, shown
    listed = run("keys")
    assert KEY in listed
    assert "0 bytes" not in listed and "memory unknown" in listed, listed


def test_a_refused_command_is_named_a_permission_not_a_silence(server, settings):
    as_user(settings, server, "+@all", "-scan")
    with pytest.raises(CommandError) as refused:
        run("keys")
    assert "did not answer" not in str(refused.value)
    assert "refused" in str(refused.value) and "permission" in str(refused.value)


def test_a_redis_that_is_gone_did_not_answer(server):
    server.kill()
    with pytest.raises(CommandError, match="did not answer"):
        run("keys")
