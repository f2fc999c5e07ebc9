"""The settings module's one ``setting_changed`` receiver and its registry of resets: a
module registers what it caches from a setting, a change of that setting (and only of
it) calls the reset, and ``reset_state()`` calls every reset, the per-process state's
too."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import override_settings

import ratelimits
from ratelimits import conf
from ratelimits.engine.keys import exemptions, identity
from ratelimits.engine.reporting import stats
from ratelimits.engine.store import breaker, connection
from ratelimits.engine.table import current
from ratelimits.testutils import reset_state

PACKAGE = Path(ratelimits.__file__).resolve().parent


@pytest.fixture
def registry() -> Iterator[list[str]]:
    """A list the test's resets append to; the registry is put back as it was after."""
    kept = dict(conf._registered)
    try:
        yield []
    finally:
        conf._registered.clear()
        conf._registered.update(kept)


def test_only_the_settings_module_listens_to_setting_changed() -> None:
    listening = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if re.search(r"\bsetting_changed\b", path.read_text(encoding="utf-8"))
    )
    assert listening == ["conf.py"]


def test_a_reset_runs_when_one_of_its_settings_changes_and_only_then(registry) -> None:
    @conf.resets_on_setting_change("SECRET_KEY", "TIME_ZONE")
    def forget() -> None:
        registry.append("forget")

    with override_settings(USE_TZ=False):
        pass
    assert registry == []
    with override_settings(SECRET_KEY="another secret key of fifty characters or more, ok"):
        assert registry == ["forget"]
    assert registry == ["forget", "forget"]  # leaving the override is a change too
    with override_settings(TIME_ZONE="Asia/Tokyo"):
        pass
    assert registry == ["forget"] * 4


def test_any_setting_and_the_process_state(registry) -> None:
    conf.resets_on_setting_change(conf.ANY_SETTING)(lambda: registry.append("any"))
    conf.resets_process_state(lambda: registry.append("process"))

    with override_settings(USE_THOUSAND_SEPARATOR=True):
        assert registry == ["any"]
    assert registry == ["any", "any"]
    registry.clear()
    reset_state()
    assert sorted(registry) == ["any", "process"]


def test_a_reset_registered_twice_runs_once(registry) -> None:
    def forget() -> None:
        registry.append("forget")

    conf.resets_on_setting_change("RATELIMITS")(forget)
    conf.resets_on_setting_change("RATELIMITS")(forget)
    with override_settings(RATELIMITS={"KEY_PREFIX": "other"}):
        assert registry == ["forget"]


def test_a_reset_needs_the_settings_it_follows() -> None:
    with pytest.raises(TypeError, match="names of the settings"):
        conf.resets_on_setting_change()
    with pytest.raises(TypeError, match="names of the settings"):
        conf.resets_on_setting_change("")


def test_the_settings_cache_is_forgotten_first(registry) -> None:
    """A reset that reads a setting reads the new value: the receiver forgets the
    settings read before it calls the resets."""
    conf.resets_on_setting_change("RATELIMITS")(
        lambda: registry.append(conf.app_settings.KEY_PREFIX)
    )
    assert conf.app_settings.KEY_PREFIX == "rl"  # read and kept
    with override_settings(RATELIMITS={"KEY_PREFIX": "other"}):
        assert registry == ["other"]
    assert registry == ["other", "rl"]


def test_the_modules_keep_their_triggers() -> None:
    """What each cache is built from, as the modules register it."""

    def following(reset: object) -> frozenset[str] | None:
        return conf._registered[reset].settings  # type: ignore[index]

    assert following(connection.reset) == {"RATELIMITS", "CACHES"}
    assert following(current.reset) == {"RATELIMITS", "CACHES"}
    assert following(exemptions.networks.cache_clear) == {"RATELIMITS"}
    assert following(identity._hash_key.cache_clear) == {"SECRET_KEY"}
    assert following(stats.reset) is None  # per-process state: reset_state() only
    assert following(breaker.reset_all) is None


def test_reset_state_calls_a_module_before_those_it_uses() -> None:
    order = conf.registered_resets()
    assert order.index(stats.reset) < order.index(connection.reset)  # the flusher stops first
    assert order.index(current.reset) < order.index(connection.reset)
    assert order.index(connection.reset) < order.index(breaker.reset_all)


def test_reset_state_forgets_the_caches_built_from_settings_too() -> None:
    with override_settings(RATELIMITS={"EXEMPT_NETWORKS": ["10.0.0.0/8"]}):
        assert exemptions.is_exempt_address("10.1.2.3")
        assert exemptions.networks.cache_info().currsize == 1
        reset_state()
        assert exemptions.networks.cache_info().currsize == 0
        assert exemptions.is_exempt_address("10.1.2.3")


def test_a_settings_change_reaches_the_cache_that_follows_it() -> None:
    with override_settings(RATELIMITS={"EXEMPT_NETWORKS": ["10.0.0.0/8"]}):
        assert exemptions.is_exempt_address("10.1.2.3")
        with override_settings(RATELIMITS={"EXEMPT_NETWORKS": []}):
            assert not exemptions.is_exempt_address("10.1.2.3")
        assert exemptions.is_exempt_address("10.1.2.3")
    first = identity._hash_key()
    with override_settings(SECRET_KEY="a different secret key, long enough for Django's check"):
        assert identity._hash_key() != first
    assert identity._hash_key() == first
