"""I023: sign-in protection installed without a word about the audit trail."""

from __future__ import annotations

from typing import Any

from django.core.checks import run_checks

from tests.helpers.redis_setup import ratelimits_settings

BACKENDS = ["ratelimits.backends.RateLimitBackend", "django.contrib.auth.backends.ModelBackend"]


def ids(settings: Any, backends: list[str], **values: Any) -> list[str]:
    settings.AUTHENTICATION_BACKENDS = backends
    settings.RATELIMITS = {
        k: v for k, v in ratelimits_settings(**values).items() if k != "SIGN_IN_AUDIT"
    } | values
    return [m.id for m in run_checks() if m.id in ("ratelimits.I023", "ratelimits.E002")]


def test_the_backend_without_the_setting_suggests_it(settings):
    assert ids(settings, BACKENDS) == ["ratelimits.I023"]


def test_either_answer_silences_it(settings):
    assert ids(settings, BACKENDS, SIGN_IN_AUDIT=True) == []
    assert ids(settings, BACKENDS, SIGN_IN_AUDIT=False) == []


def test_no_backend_no_suggestion(settings):
    assert ids(settings, BACKENDS[1:]) == []


def test_a_bad_value_is_an_error(settings):
    assert ids(settings, BACKENDS, SIGN_IN_AUDIT="yes") == ["ratelimits.E002"]
    assert ids(settings, BACKENDS, SIGN_IN_AUDIT=True, SIGN_IN_LOG_USERNAMES="no") == [
        "ratelimits.E002"
    ]
