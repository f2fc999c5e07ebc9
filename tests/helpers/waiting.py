"""Waiting for a condition, with a bound, or for the clock to leave a window's end."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    condition: Callable[[], bool],
    timeout: float = 10.0,
    what: str = "the condition",
    every: float = 0.01,
) -> float:
    """Poll ``condition`` every ``every`` seconds until true, failing the test after
    ``timeout`` seconds; the seconds it took."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"{what}: not within {timeout} s"
        time.sleep(every)
    return time.monotonic() - started


def wait_clear_of_window_boundary(window: int, margin: float = 5.0) -> None:
    """Start well inside a clock-aligned window (``margin`` seconds or more before its
    end), so that counts stay in one window."""
    into = time.time() % window
    if into > window - margin:
        time.sleep(window - into + 0.1)
