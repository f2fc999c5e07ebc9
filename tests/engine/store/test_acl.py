"""The limiter under a Redis ACL user: ``FCALL`` refused (``NOPERM``) falls back to the
script as a server without Functions does; a user who may run no script at all gets
each policy's fail mode, and one error that says so when the breaker opens, not one
per request. Real servers, real ACL users; the sync path and the async one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from django.test import override_settings

from ratelimits.engine import limiter
from ratelimits.engine.policy.compiled import Check
from ratelimits.testutils import RedisServer, reset_state
from tests.helpers import caches_at, policy, ratelimits_settings, require_functions

PASSWORD = "acl-test-secret"


@pytest.fixture(params=["sync", "async"])
def decide(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "sync":
        yield limiter.decide
        return
    loop = asyncio.new_event_loop()
    try:
        yield lambda checks: loop.run_until_complete(limiter.adecide(checks))
    finally:
        loop.close()


def commandstats(client: Any, name: str) -> int:
    """Calls of ``name`` the server ran since the stats were reset."""
    row = client.info("commandstats").get(f"cmdstat_{name}", {})
    return int(row.get("calls", 0)) - int(row.get("failed_calls", 0))


@contextmanager
def as_user(server: RedisServer, name: str, rules: Sequence[str], **limits: Any) -> Iterator[None]:
    """The limiter's Redis reached as ACL user ``name`` with ``rules``."""
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", name, "reset", "on", f">{PASSWORD}", *rules)
    if _has_functions(admin):
        admin.function_flush()
    admin.script_flush()
    admin.config_resetstat()
    location = f"redis://{name}:{PASSWORD}@127.0.0.1:{server.port}/0"
    caches = {"default": {**caches_at(server.port)["default"], "LOCATION": location}}
    try:
        with override_settings(CACHES=caches, RATELIMITS=ratelimits_settings(**limits)):
            reset_state()
            yield
    finally:
        reset_state()
        admin.acl_deluser(name)


def _has_functions(client: Any) -> bool:
    return int(str(client.info("server")["redis_version"]).split(".")[0]) >= 7


def requests(decide: Any, count: int) -> list[tuple[bool, int, bool]]:
    """(allowed, remaining, failed) of ``count`` requests under a policy of 3."""
    checked = policy("sliding_log", 3, 3600, name="items", fail_open=True)
    found = [decide([Check(checked, "ip:203.0.113.9")]).decisions[0] for _ in range(count)]
    return [(d.allowed, d.remaining, d.failed) for d in found]


def test_a_user_refused_fcall_gets_the_script(decide, redis_server, caplog):
    require_functions(redis_server.client())
    rules = ["~*", "&*", "+@all", "-fcall"]
    with as_user(redis_server, "limited", rules), caplog.at_level(logging.INFO, "ratelimits"):
        assert requests(decide, 4) == [
            (True, 2, False), (True, 1, False), (True, 0, False), (False, 0, False)
        ]  # fmt: skip
    admin = redis_server.client()
    assert commandstats(admin, "eval") == 1  # the first call carried the source
    assert commandstats(admin, "evalsha") == 2  # the 4th: a denial remembered here
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize(
    "refused",
    [
        "-@scripting",  # no script may run
        "-zadd",  # the script runs, not a command it needs
    ],
)
def test_a_user_refused_scripting_gets_one_error_per_breaker_opening(
    decide, redis_server, caplog, refused
):
    rules = ["~*", "&*", "+@all", refused]
    limits = {"BREAKER_THRESHOLD": 3, "BREAKER_COOLDOWN": 60}
    user = as_user(redis_server, "noscripts", rules, **limits)
    with user, caplog.at_level(logging.INFO, "ratelimits"):
        found = requests(decide, 10)
    assert found == [(True, 0, True)] * 10  # fail open, each
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, caplog.messages
    assert "ACL denies scripting" in errors[0].getMessage()
    assert "NOPERM" in errors[0].getMessage()
