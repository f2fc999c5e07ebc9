"""``manage.py check --deploy`` asks the limiter's Redis what it lets the limiter do: the
server and its version, whether Functions or scripts may run, the commands an ACL
refuses (``ACL DRYRUN`` where there is one), and a refused password or a failed TLS
handshake, each with its id and a hint. Real servers, real ACL users, real TLS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.checks import run_checks

from ratelimits.testutils import RedisServer
from tests.helpers import caches_at, server_major
from tests.tls import Certs, shared_certs, tls_server

IDS = ("I036", "W032", "W033", "W034", "W035", "W036")


def access_messages() -> list[Any]:
    found = run_checks(include_deployment_checks=True)
    return [m for m in found if m.id and m.id.split(".")[-1] in IDS]


@pytest.fixture
def own_redis(settings: Any) -> Iterator[RedisServer]:
    with RedisServer() as server:
        settings.CACHES = caches_at(server.port)
        yield server


def as_user(settings: Any, server: RedisServer, user: str, password: str = "pw") -> None:
    location = f"redis://{user}:{password}@127.0.0.1:{server.port}/0"
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": location}}


def test_a_healthy_server_is_named_with_its_version_and_nothing_else(own_redis):
    (info,) = access_messages()
    assert info.id == "ratelimits.I036"
    server = own_redis.client().info("server")
    # Valkey reports redis_version 7.2.4 for compatibility, and its own in valkey_version.
    version = server.get("valkey_version") or server["redis_version"]
    assert version in info.msg and f"127.0.0.1:{own_redis.port}" in info.msg
    expected = "Function (FCALL)" if server_major(own_redis.client()) >= 7 else "script"
    assert expected in info.msg
    # Not among the checks every manage.py command runs (it connects).
    assert [m for m in run_checks() if m.id and m.id.split(".")[-1] in IDS] == []


def test_a_wrong_password_is_w032(own_redis, settings):
    own_redis.client().acl_setuser("app", enabled=True, passwords=["+right"], keys=["*"],
                                   commands=["+@all"])  # fmt: skip
    as_user(settings, own_redis, "app", "wrong")
    (message,) = access_messages()
    assert message.id == "ratelimits.W032"
    assert "credentials" in message.msg and "password" in message.hint


def test_a_user_missing_commands_is_w036_naming_them(own_redis, settings):
    own_redis.client().acl_setuser(
        "app",
        enabled=True,
        passwords=["+pw"],
        keys=["rl:*"],
        commands=["+@all", "-memory", "-scan"],
    )
    as_user(settings, own_redis, "app")
    ids = [m.id for m in access_messages()]
    assert ids == ["ratelimits.I036", "ratelimits.W036"], ids
    (missing,) = [m for m in access_messages() if m.id == "ratelimits.W036"]
    assert "MEMORY USAGE (the tools and the admin)" in missing.msg
    assert "SCAN (the tools and the admin)" in missing.msg
    assert "docs/redis.md" in missing.hint


def test_a_user_refused_all_scripting_is_w035(own_redis, settings):
    own_redis.client().acl_setuser(
        "app", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-@scripting"]
    )
    as_user(settings, own_redis, "app")
    ids = [m.id for m in access_messages()]
    assert "ratelimits.W035" in ids, ids
    (info,) = [m for m in access_messages() if m.id == "ratelimits.I036"]
    assert "none of the limiter's code" in info.msg


def test_a_user_refused_fcall_still_runs_the_script_and_is_not_warned(own_redis, settings):
    if server_major(own_redis.client()) < 7:
        pytest.skip("FCALL is Redis 7+")
    own_redis.client().acl_setuser(
        "app", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-fcall"]
    )
    as_user(settings, own_redis, "app")
    (info,) = access_messages()
    assert "as a script (EVALSHA)" in info.msg


def test_a_user_refused_fcall_ro_is_w036_for_the_tools(own_redis, settings):
    """The tools' looks are ``FCALL_RO`` of the no-writes function on Redis 7+."""
    if server_major(own_redis.client()) < 7:
        pytest.skip("FCALL_RO is Redis 7+")
    own_redis.client().acl_setuser(
        "app", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-fcall_ro"]
    )
    as_user(settings, own_redis, "app")
    ids = [m.id for m in access_messages()]
    assert ids == ["ratelimits.I036", "ratelimits.W036"], ids
    (missing,) = [m for m in access_messages() if m.id == "ratelimits.W036"]
    assert "FCALL_RO (the tools and the admin)" in missing.msg


@pytest.fixture
def certs() -> Certs:
    return shared_certs()


def test_an_untrusted_ca_and_a_plain_client_on_a_tls_port_are_w033(settings, certs):
    default = settings.CACHES["default"]
    with tls_server(certs) as (_, tls_port):
        settings.CACHES = {"default": {**default, "LOCATION": f"rediss://127.0.0.1:{tls_port}/0"}}
        (untrusted,) = access_messages()  # no CA given: the system's do not know ours
        assert untrusted.id == "ratelimits.W033", untrusted
        assert "ssl_ca_certs" in untrusted.hint
        settings.CACHES = {"default": {**default, "LOCATION": f"redis://127.0.0.1:{tls_port}/0"}}
        (plain,) = access_messages()
        assert plain.id == "ratelimits.W033", plain
        assert "rediss://" in plain.hint
