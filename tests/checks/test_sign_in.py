"""The system checks of sign-in protection and failed authentication: W020 (the backend
not first), W021 (sign-in policies with no backend), W022 (failures policies with no
middleware to count a framework's failed authentication)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import run_checks

from tests.helpers import create_policy

BACKEND = "ratelimits.backends.RateLimitBackend"
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


def ids(databases: list[str] | None = None) -> list[str]:
    return [m.id for m in run_checks(databases=databases) if m.id.startswith("ratelimits.W02")]


def test_w020_warns_when_the_backend_is_not_first(settings: Any) -> None:
    settings.AUTHENTICATION_BACKENDS = [MODEL_BACKEND, BACKEND]
    assert ids() == ["ratelimits.W020"]
    settings.AUTHENTICATION_BACKENDS = [BACKEND, MODEL_BACKEND]
    assert ids() == []


@pytest.mark.django_db
def test_w021_warns_about_sign_in_policies_nothing_decides(settings: Any) -> None:
    create_policy("sign-in", "*", key="username", counts="sign_in_failures")
    settings.AUTHENTICATION_BACKENDS = [MODEL_BACKEND]
    assert ids() == []  # no database asked
    found = [m for m in run_checks(databases=["default"]) if m.id == "ratelimits.W021"]
    assert len(found) == 1
    assert "'sign-in'" not in found[0].msg and "sign-in" in found[0].msg
    settings.AUTHENTICATION_BACKENDS = [BACKEND, MODEL_BACKEND]
    assert ids(["default"]) == []


@pytest.mark.django_db
def test_w022_warns_about_failures_policies_without_the_middleware(settings: Any) -> None:
    create_policy("api-failures", "/api/*", counts="failures")
    assert ids(["default"]) == []  # the test settings install the middleware
    settings.MIDDLEWARE = [
        m for m in settings.MIDDLEWARE if m != "ratelimits.middleware.RateLimitMiddleware"
    ]
    assert "ratelimits.W022" in ids(["default"])
