"""The drills' policies, their Redis timeout (patient unless a drill measures it), and
no garbage collection pauses in the latency drills."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from ratelimits.conf import app_settings
from tests.engine.store.drills.traffic import PATIENT_TIMEOUT
from tests.helpers import fail_mode_policies, ratelimits_settings


@pytest.fixture
def fail_policies(settings: Any) -> None:
    """``items``: exhausted after 20, fail open. ``login``: never exhausted here, fail closed.

    The worker does not remember denials here (``LOCAL_DENIALS`` 0): a remembered denial
    of the exhausted ``items`` would hold through the outage (tests/engine/test_denials.py
    shows that), and these drills measure the fail modes of requests that need Redis."""
    settings.RATELIMITS = {**getattr(settings, "RATELIMITS", {}), "LOCAL_DENIALS": 0}
    fail_mode_policies(items={"limit": 20}, login={"methods": "POST", "limit": 100_000})


@pytest.fixture(autouse=True)
def patient_timeout() -> Iterator[None]:
    """Every drill's SOCKET_TIMEOUT is :data:`PATIENT_TIMEOUT` unless it asks for
    :func:`explicit_timeout`. (A stopped server refuses connections at once: restarts do
    not wait for it.)"""
    with override_settings(RATELIMITS=ratelimits_settings(SOCKET_TIMEOUT=PATIENT_TIMEOUT)):
        yield


@pytest.fixture
def explicit_timeout(patient_timeout: None) -> Iterator[float]:
    """The request path's Redis timeout, set explicitly (its default) for the drills that
    measure it."""
    timeout = 0.1
    with override_settings(RATELIMITS=ratelimits_settings(SOCKET_TIMEOUT=timeout)):
        assert float(app_settings.SOCKET_TIMEOUT) == timeout
        yield timeout


@pytest.fixture
def no_gc_pauses() -> Iterator[None]:
    """No garbage collection during a latency drill. The test process's heap (fixtures,
    hypothesis examples, the responses kept) makes a full collection stop every thread
    for 100-220 ms late in a run: a pause of the test process, not of the limiter."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()
