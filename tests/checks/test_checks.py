"""The ``manage.py check`` messages of ratelimits, run through Django's check framework."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.conf import settings
from django.core.checks import ERROR, WARNING, CheckMessage, run_checks
from django.test import override_settings
from django_redis.cache import RedisCache

from ratelimits.checks import (
    LIMITER_MIDDLEWARE_PATH,
    MIDDLEWARE_PATH,
    THROTTLE_PATH,
    check_cache,
)
from ratelimits.engine.policy import periods
from ratelimits.engine.store import scripts
from ratelimits.models import Policy
from tests.helpers import ratelimits_settings

ALL_PARTS = scripts.DECIDE_PARTS


class SubclassedRedisCache(RedisCache):
    """A project's own django-redis subclass: still django-redis."""


def ratelimits_messages() -> list[CheckMessage]:
    """The ratelimits messages of a full check run; each one must carry a hint."""
    found = [m for m in run_checks() if (m.id or "").startswith("ratelimits.")]
    for message in found:
        assert isinstance(message.hint, str), f"{message.id} has no hint"
        assert message.hint.strip(), f"{message.id} has an empty hint"
    return found


def ids(messages: list[CheckMessage]) -> list[str]:
    return sorted(m.id or "" for m in messages)


def only(messages: list[CheckMessage], check_id: str) -> CheckMessage:
    """The one message with ``check_id``, and that every other message has another id."""
    matching = [m for m in messages if m.id == check_id]
    assert len(matching) == 1, ids(messages)
    return matching[0]


def test_the_project_settings_are_clean() -> None:
    assert ratelimits_messages() == []


@pytest.mark.parametrize("value", [["CACHE", "default"], "default", 1])
def test_ratelimits_not_a_dict(value: Any) -> None:
    with override_settings(RATELIMITS=value):
        messages = ratelimits_messages()
    assert ids(messages) == ["ratelimits.E001"]
    assert messages[0].level == ERROR
    assert "dict" in messages[0].msg


def test_ratelimits_unset_uses_the_defaults() -> None:
    with override_settings(RATELIMITS=None):
        # Nothing wrong; the one note is the sign-in audit trail, neither on nor declined
        # (the project installs RateLimitBackend).
        assert ids(ratelimits_messages()) == ["ratelimits.I023"]


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("KEY_PREFIX", "a{b}"),
        ("KEY_PREFIX", ""),
        ("KEY_PREFIX", "x" * 33),
        ("KEY_PREFIX", 7),
        ("SOCKET_TIMEOUT", 0),
        ("SOCKET_TIMEOUT", "0.1"),
        ("POLICY_REFRESH_INTERVAL", -1),
        ("POLICY_MAX_AGE", True),
        ("BREAKER_COOLDOWN", None),
        ("NUM_PROXIES", -1),
        ("NUM_PROXIES", 1.0),
        ("NUM_PROXIES", True),
        ("FAIL_CLOSED_RETRY_AFTER", -1),
        ("LOCAL_DENIALS", -1),
        ("LOCAL_DENIALS", 2.5),
        ("IPV6_PREFIX", 129),
        ("IPV6_PREFIX", -1),
        ("BREAKER_THRESHOLD", 0),
        ("BREAKER_THRESHOLD", 2.5),
        ("EXEMPT_NETWORKS", "10.0.0.0/8"),
        ("EXEMPT_NETWORKS", ["10.0.0.0/8", "10.0.0.300/32"]),
        ("EXEMPT_NETWORKS", [10]),
    ],
)
def test_bad_value_is_e002_naming_the_setting(setting: str, value: Any) -> None:
    with override_settings(RATELIMITS=ratelimits_settings(**{setting: value})):
        messages = ratelimits_messages()
    message = only(messages, "ratelimits.E002")
    assert ids(messages) == ["ratelimits.E002"]
    assert message.level == ERROR
    assert setting in message.msg
    assert "docs/settings.md" in message.hint  # the page that lists every setting


@pytest.mark.parametrize("setting", ["BREAKER_THRESHOLD", "IPV6_PREFIX"])
def test_a_bool_is_not_an_integer_setting(setting: str) -> None:
    with override_settings(RATELIMITS=ratelimits_settings(**{setting: True})):
        messages = ratelimits_messages()
    assert setting in only(messages, "ratelimits.E002").msg


def test_good_edge_values_pass() -> None:
    good = ratelimits_settings(
        KEY_PREFIX="a" * 32, NUM_PROXIES=0, IPV6_PREFIX=128, BREAKER_THRESHOLD=1
    )
    with override_settings(RATELIMITS=good):
        assert ratelimits_messages() == []


def test_several_bad_values_are_all_reported() -> None:
    bad = ratelimits_settings(KEY_PREFIX="a{b}", SOCKET_TIMEOUT=0, IPV6_PREFIX=129)
    with override_settings(RATELIMITS=bad):
        messages = ratelimits_messages()
    assert ids(messages) == ["ratelimits.E002"] * 3
    text = "\n".join(m.msg for m in messages)
    assert all(name in text for name in ("KEY_PREFIX", "SOCKET_TIMEOUT", "IPV6_PREFIX"))


@pytest.mark.parametrize("value", [0, -0.5, 1.01, 2, "0.8", True, None, float("nan"), float("inf")])
def test_near_limit_outside_0_to_1_is_e002(value: Any) -> None:
    with override_settings(RATELIMITS=ratelimits_settings(NEAR_LIMIT=value)):
        messages = ratelimits_messages()
    message = only(messages, "ratelimits.E002")
    assert ids(messages) == ["ratelimits.E002"]
    assert message.msg == (
        "RATELIMITS: NEAR_LIMIT must be a number greater than 0 and at most 1 (a fraction "
        f"of the limit, such as 0.8), not {value!r}."
    )
    assert "docs/settings.md" in message.hint


@pytest.mark.parametrize("value", [1, 1.0, 0.8, 0.001])
def test_near_limit_in_0_to_1_passes(value: Any) -> None:
    with override_settings(RATELIMITS=ratelimits_settings(NEAR_LIMIT=value)):
        assert ratelimits_messages() == []


def test_unknown_setting_is_w003() -> None:
    with override_settings(RATELIMITS=ratelimits_settings(KEY_PRFIX="x")):
        messages = ratelimits_messages()
    assert ids(messages) == ["ratelimits.W003"]
    assert messages[0].level == WARNING
    assert "'KEY_PRFIX'" in messages[0].msg
    assert "KEY_PREFIX" in (messages[0].hint or "")


def test_missing_cache_alias_is_e003() -> None:
    with override_settings(RATELIMITS=ratelimits_settings(CACHE="limits")):
        messages = ratelimits_messages()
    assert ids(messages) == ["ratelimits.E003"]
    assert "'limits'" in messages[0].msg


def test_a_cache_that_is_not_django_redis_is_e004() -> None:
    caches = {
        **settings.CACHES,
        "local": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    }
    with override_settings(CACHES=caches, RATELIMITS=ratelimits_settings(CACHE="local")):
        messages = ratelimits_messages()
    assert ids(messages) == ["ratelimits.E004"]
    assert "LocMemCache" in messages[0].msg
    assert "django_redis.cache.RedisCache" in (messages[0].hint or "")


def test_an_unimportable_cache_backend_is_e004() -> None:
    """Called directly: Django's own cache checks crash on a backend that cannot import."""
    caches = {**settings.CACHES, "other": {"BACKEND": "no.such.Backend"}}
    with override_settings(CACHES=caches, RATELIMITS=ratelimits_settings(CACHE="other")):
        messages = check_cache()
    assert ids(messages) == ["ratelimits.E004"]
    assert messages[0].hint


def test_a_django_redis_subclass_is_accepted() -> None:
    backend = f"{__name__}.SubclassedRedisCache"
    caches = {**settings.CACHES, "sub": {**settings.CACHES["default"], "BACKEND": backend}}
    with override_settings(CACHES=caches, RATELIMITS=ratelimits_settings(CACHE="sub")):
        assert ratelimits_messages() == []


def without_limiter_middleware() -> list[str]:
    middleware = [m for m in settings.MIDDLEWARE if m != LIMITER_MIDDLEWARE_PATH]
    assert len(middleware) == len(settings.MIDDLEWARE) - 1
    return middleware


def test_no_face_installed_is_w001() -> None:
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_CLASSES": []}
    with override_settings(REST_FRAMEWORK=rest, MIDDLEWARE=without_limiter_middleware()):
        messages = ratelimits_messages()
    assert ids(messages) == ["ratelimits.W001"]
    assert messages[0].level == WARNING
    assert THROTTLE_PATH in (messages[0].hint or "")
    assert LIMITER_MIDDLEWARE_PATH in (messages[0].hint or "")


def test_the_middleware_alone_silences_w001() -> None:
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_CLASSES": []}
    with override_settings(REST_FRAMEWORK=rest):
        assert ratelimits_messages() == []


def test_a_decorated_view_silences_w001() -> None:
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_CLASSES": []}
    middleware = without_limiter_middleware()
    with override_settings(REST_FRAMEWORK=rest, MIDDLEWARE=middleware):
        assert ids(ratelimits_messages()) == ["ratelimits.W001"]  # the demo's URLconf
        with override_settings(ROOT_URLCONF="tests.faces.urls"):  # decorated views
            assert ratelimits_messages() == []


def test_header_middleware_below_the_limiter_is_w004() -> None:
    middleware = [m for m in settings.MIDDLEWARE if m != MIDDLEWARE_PATH] + [MIDDLEWARE_PATH]
    assert middleware.index(MIDDLEWARE_PATH) > middleware.index(LIMITER_MIDDLEWARE_PATH)
    with override_settings(MIDDLEWARE=middleware):
        message = only(ratelimits_messages(), "ratelimits.W004")
    assert message.level == WARNING
    assert "above" in (message.hint or "")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("tests.checks.test_checks.no_such_view", "cannot import"),
        ("tests.checks.test_checks.ALL_PARTS", "is not callable"),
        ("", "dotted path"),
        (42, "dotted path"),
    ],
)
def test_a_bad_throttled_view_is_e006(value: Any, reason: str) -> None:
    with override_settings(RATELIMITS=ratelimits_settings(THROTTLED_VIEW=value)):
        message = only(ratelimits_messages(), "ratelimits.E006")
    assert message.level == ERROR
    assert reason in message.msg


def test_an_importable_throttled_view_is_fine() -> None:
    view = "tests.faces.test_responses.custom_throttled"
    with override_settings(RATELIMITS=ratelimits_settings(THROTTLED_VIEW=view)):
        assert ratelimits_messages() == []


def test_throttle_in_a_tuple_counts_as_installed() -> None:
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_CLASSES": (THROTTLE_PATH,)}
    with override_settings(REST_FRAMEWORK=rest):
        assert ratelimits_messages() == []


def test_middleware_missing_with_headers_on_is_w002() -> None:
    middleware = [m for m in settings.MIDDLEWARE if m != MIDDLEWARE_PATH]
    assert len(middleware) == len(settings.MIDDLEWARE) - 1
    with override_settings(MIDDLEWARE=middleware):
        messages = ratelimits_messages()
    assert ids(messages) == ["ratelimits.W002"]
    assert MIDDLEWARE_PATH in (messages[0].hint or "")


def test_middleware_missing_with_headers_off_is_fine() -> None:
    middleware = [m for m in settings.MIDDLEWARE if m != MIDDLEWARE_PATH]
    with override_settings(MIDDLEWARE=middleware, RATELIMITS=ratelimits_settings(HEADERS=False)):
        assert ratelimits_messages() == []


def test_no_lua_files_is_e005(tmp_path: Path) -> None:
    with mock.patch("ratelimits.engine.store.scripts.lua_dir", return_value=tmp_path):
        messages = ratelimits_messages()
    assert ids(messages) == ["ratelimits.E005"]
    assert messages[0].level == ERROR
    assert all(part in messages[0].msg for part in ALL_PARTS)


def test_some_lua_files_missing_is_e005_naming_them(tmp_path: Path) -> None:
    (tmp_path / "decide.lua").write_text("-- present\n")
    (tmp_path / "prelude.lua").write_text("-- present\n")
    with mock.patch("ratelimits.engine.store.scripts.lua_dir", return_value=tmp_path):
        messages = ratelimits_messages()
    assert ids(messages) == ["ratelimits.E005"]
    assert "sliding_log.lua, compact_log.lua, sliding_counter.lua, fixed_window.lua" in (
        messages[0].msg
    )
    assert "decide.lua" not in messages[0].msg
    assert "prelude.lua" not in messages[0].msg


def test_scripts_not_found_is_e005() -> None:
    missing = scripts.ScriptsNotFound("gone")
    with mock.patch("ratelimits.engine.store.scripts.lua_dir", side_effect=missing):
        messages = ratelimits_messages()
    assert ids(messages) == ["ratelimits.E005"]


@pytest.mark.django_db
def test_an_enabled_calendar_policy_in_a_zone_this_machine_lacks_is_w005() -> None:
    """Checked with the database, as Django's database checks are (``migrate``, ``check
    --database``): the zone a stored row names, and a blank zone's TIME_ZONE."""
    fields = {"endpoint": "api:search", "algorithm": "fixed_window", "limit": 5}
    for name in ("berlin", "mars", "off", "site"):
        Policy.objects.create(name=name, calendar="month", time_zone="Europe/Berlin", **fields)
    Policy.objects.create(name="rolling", window=60, **fields)
    Policy.objects.filter(name__in=["mars", "off"]).update(time_zone="Mars/Olympus_Mons")
    Policy.objects.filter(name="off").update(enabled=False)
    Policy.objects.filter(name="site").update(time_zone="")

    assert [m for m in run_checks() if m.id == "ratelimits.W005"] == []  # no database asked
    found = [m for m in run_checks(databases=["default"]) if m.id == "ratelimits.W005"]
    assert [m.level for m in found] == [WARNING]
    assert found[0].msg.startswith(
        "The policy 'mars' counts calendar periods in the time zone 'Mars/Olympus_Mons', "
        "which this machine's time zone database does not know"
    )
    assert "pip install tzdata" in (found[0].hint or "")
    assert periods.zone(settings.TIME_ZONE)  # the site's zone is known here: 'site' is fine


@pytest.mark.django_db
def test_w005_passes_when_every_calendar_zone_is_known() -> None:
    Policy.objects.create(
        name="quota", endpoint="q", algorithm="fixed_window", limit=5, calendar="day",
        time_zone="Pacific/Chatham",
    )  # fmt: skip
    assert [m for m in run_checks(databases=["default"]) if m.id == "ratelimits.W005"] == []


@pytest.mark.django_db
def test_a_policy_against_guessing_that_fails_open_is_w040() -> None:
    """Each enabled policy that counts failures or failed sign-ins, or has a lockout, and
    lets requests through while Redis cannot answer: an attacker who can make Redis
    unavailable would get unlimited guesses."""
    fields = {"endpoint": "api:login", "algorithm": "sliding_log", "limit": 5, "window": 60}
    Policy.objects.create(name="login", counts="failures", fail_open=True, **fields)
    Policy.objects.create(name="locks", lockout=900, fail_open=True, **fields)
    Policy.objects.create(name="sign-in", counts="sign_in_failures", key="ip", **fields)
    Policy.objects.create(name="closed", counts="failures", fail_open=False, **fields)
    Policy.objects.create(name="search", fail_open=True, **fields)  # an ordinary limit
    Policy.objects.create(name="off", counts="failures", enabled=False, **fields)

    assert [m for m in run_checks() if m.id == "ratelimits.W040"] == []  # no database asked
    found = [m for m in run_checks(databases=["default"]) if m.id == "ratelimits.W040"]
    assert [m.msg.split(" ", 3)[2] for m in found] == ["'locks'", "'login'", "'sign-in'"]
    assert [m.level for m in found] == [WARNING] * 3
    assert found[0].msg.startswith("The policy 'locks' has a lockout, a guard against guessing")
    assert found[1].msg.startswith("The policy 'login' counts failures, a guard")
    assert "Untick fail_open" in (found[0].hint or "")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (["10.0.0.0/8", "scraper"], "METRICS_ALLOWED_NETWORKS: 'scraper' is not an IP address"),
        ("10.0.0.0/8", "METRICS_ALLOWED_NETWORKS must be a list of networks"),
    ],
)
def test_a_bad_metrics_network_is_e002(value: Any, problem: str) -> None:
    with override_settings(RATELIMITS=ratelimits_settings(METRICS_ALLOWED_NETWORKS=value)):
        errors = [m for m in run_checks() if m.id == "ratelimits.E002"]
    assert [m.msg for m in errors if problem in m.msg], [m.msg for m in errors]
