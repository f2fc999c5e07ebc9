"""The adoption tests' site: DRF's throttles as a DRF project sets them (the rates and the
default classes patched where DRF bound them when imported, the counters in the test
Redis through django-redis, the project's cache), then the same views under PolicyThrottle."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client, override_settings
from rest_framework.throttling import SimpleRateThrottle, UserRateThrottle
from rest_framework.views import APIView

from ratelimits.testutils import reset_state
from ratelimits.throttling import PolicyThrottle
from tests.adopt.views import RATES

DRF_URLS = "tests.adopt.drf_urls"
POLICY_URLS = "tests.adopt.policy_urls"


@pytest.fixture
def drf_site(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The site under DRF's throttles: DEFAULT_THROTTLE_CLASSES = [UserRateThrottle]."""
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", RATES)
    monkeypatch.setattr(APIView, "throttle_classes", [UserRateThrottle])
    with override_settings(ROOT_URLCONF=DRF_URLS):
        yield


def switch_to_policies(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The same site with DEFAULT_THROTTLE_CLASSES = [PolicyThrottle] and the adopted
    views' own throttles replaced by it; a context manager."""
    monkeypatch.setattr(APIView, "throttle_classes", [PolicyThrottle])
    reset_state()
    return override_settings(ROOT_URLCONF=POLICY_URLS)


@pytest.fixture
def clients(alice: Any) -> dict[str, Client]:
    """An anonymous client and alice, signed in (both from 127.0.0.1)."""
    signed_in = Client()
    signed_in.force_login(alice)
    return {"anonymous": Client(), "alice": signed_in}
