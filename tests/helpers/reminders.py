"""Warnings said again each minute, on a clock the test moves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ratelimits.engine.reminders import Reminder


class ManualClock:
    """A monotonic clock the test moves by hand (``clock.now += 60``)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def remind_on(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> ManualClock:
    """Put a fresh :class:`Reminder` on a clock the test moves in ``module.name``; the
    clock."""
    clock = ManualClock()
    monkeypatch.setattr(module, name, Reminder(clock=clock))
    return clock


def assert_said_once_a_minute(said: Callable[[], int], clock: ManualClock) -> None:
    """``said()`` makes the warning's cause happen once more and counts its lines so far:
    the first is said at once, not again within the minute, again at the minute, and
    once only then."""
    assert said() == 1
    clock.now += 59.9
    assert said() == 1
    clock.now += 0.1
    assert said() == 2
    assert said() == 2
