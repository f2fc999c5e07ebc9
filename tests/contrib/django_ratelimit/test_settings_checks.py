"""The system checks of django-ratelimit's settings, and ``RatelimitMiddleware``."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import run_checks
from django.http import HttpResponse
from django.test import RequestFactory, override_settings

from ratelimits.contrib.django_ratelimit.exceptions import Ratelimited
from ratelimits.contrib.django_ratelimit.middleware import RatelimitMiddleware

OURS = {"ratelimits.E050", "ratelimits.W050", "ratelimits.W051", "ratelimits.W052"}


def ids() -> set[str]:
    """The ids of the django-ratelimit settings' checks that fire."""
    return {m.id for m in run_checks() if m.id in OURS}


def test_settings_it_reads_raise_nothing() -> None:
    assert ids() == set()


@pytest.mark.parametrize(
    ("cache", "expected"),
    [
        ({}, "ratelimits.E050"),
        ({"x": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}, "ratelimits.W051"),
        ({"x": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}, "ratelimits.W050"),
    ],
)
def test_a_cache_it_cannot_count_in_is_named(
    settings: Any, cache: dict[str, Any], expected: str
) -> None:
    settings.CACHES = {**settings.CACHES, **cache}
    settings.RATELIMIT_USE_CACHE = "x"
    assert ids() == {expected}


def test_settings_it_does_not_read_are_named(settings: Any) -> None:
    settings.RATELIMIT_CACHE_PREFIX = "rl:"
    assert ids() == {"ratelimits.W052"}


def answer(request: Any, exception: Exception) -> HttpResponse:
    return HttpResponse("slow down", status=429)


@override_settings(RATELIMIT_VIEW=f"{__name__}.answer")
def test_the_middleware_renders_ratelimit_view_for_ratelimited_only() -> None:
    middleware = RatelimitMiddleware(lambda request: HttpResponse())
    request = RequestFactory().get("/")
    response = middleware.process_exception(request, Ratelimited())
    assert response is not None and response.status_code == 429
    assert middleware.process_exception(request, ValueError()) is None
