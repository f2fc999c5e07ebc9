"""A sample project's test setup after ``adopt``: its views under PolicyThrottle, the plan
``adopt --output`` wrote kept next to its tests, and ratelimits' fixture loading it. The
policy table is built in the background, as the app starts it, until the fixture (or the
mixin) says otherwise."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import override_settings
from rest_framework.views import APIView

from ratelimits.testing.policies import build_tables_in_test_thread
from ratelimits.testutils import ratelimits_policies  # noqa: F401 - the fixture
from ratelimits.throttling import PolicyThrottle

#: The plan ``manage.py ratelimits adopt --output`` wrote.
ADOPTED = Path(__file__).with_name("adopted.json")


@pytest.fixture
def ratelimits_policy_file() -> Path:
    return ADOPTED


@pytest.fixture(autouse=True)
def _sample_project(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """DEFAULT_THROTTLE_CLASSES = [PolicyThrottle], the sample's URLconf, and the table
    built in the background as the app builds it."""
    monkeypatch.setattr(APIView, "throttle_classes", [PolicyThrottle])
    build_tables_in_test_thread(False)
    with override_settings(ROOT_URLCONF="tests.adopt.policy_urls"):
        yield
