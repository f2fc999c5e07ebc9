"""The adoption tests' site: DRF's throttles as a DRF project sets them (the rates and the
default classes patched where DRF bound them when imported, the counters in the test
Redis through django-redis, the project's cache), then the same views under PolicyThrottle."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client, override_settings
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle
from rest_framework.views import APIView

from ratelimits.testutils import reset_state
from ratelimits.throttling import PolicyThrottle
from tests.adopt.views import RATES

DRF_URLS = "tests.adopt.drf_urls"
POLICY_URLS = "tests.adopt.policy_urls"
CLASSIC_URLS = "tests.adopt.classic_urls"
CLASSIC_POLICY_URLS = "tests.adopt.classic_policy_urls"
#: DRF's classic rates: anonymous clients get less than signed-in users.
CLASSIC_RATES = {"anon": "2/min", "user": "4/min"}


@pytest.fixture
def drf_site(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The site under DRF's throttles: DEFAULT_THROTTLE_CLASSES = [UserRateThrottle]."""
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", RATES)
    monkeypatch.setattr(APIView, "throttle_classes", [UserRateThrottle])
    with override_settings(ROOT_URLCONF=DRF_URLS):
        yield


@pytest.fixture
def classic_site(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """DRF's classic setup: DEFAULT_THROTTLE_CLASSES = [AnonRateThrottle,
    UserRateThrottle] at :data:`CLASSIC_RATES`."""
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", CLASSIC_RATES)
    monkeypatch.setattr(APIView, "throttle_classes", [AnonRateThrottle, UserRateThrottle])
    with override_settings(ROOT_URLCONF=CLASSIC_URLS):
        yield


def switch_to_policies(monkeypatch: pytest.MonkeyPatch, urls: str = POLICY_URLS) -> Any:
    """The same site with DEFAULT_THROTTLE_CLASSES = [PolicyThrottle] and the adopted
    views' own throttles replaced by it (the URLconf ``urls``); a context manager."""
    monkeypatch.setattr(APIView, "throttle_classes", [PolicyThrottle])
    reset_state()
    return override_settings(ROOT_URLCONF=urls)


@pytest.fixture
def clients(alice: Any) -> dict[str, Client]:
    """An anonymous client and alice, signed in (both from 127.0.0.1)."""
    signed_in = Client()
    signed_in.force_login(alice)
    return {"anonymous": Client(), "alice": signed_in}
