"""Shadow mode logs a client's would-be denials once per policy and window, in bounded
memory, and never a secret: the log a flood writes stays short."""

from __future__ import annotations

import logging

import pytest

from ratelimits.engine import limiter
from ratelimits.engine.decision import Decision
from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.reporting.shadow_log import QUIET_MAX, SUMMARY_INTERVAL, ShadowLog
from tests.helpers import policy


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def would_deny(who: str, name: str = "shadowed", window: int = 60) -> Decision:
    return Decision(
        policy=name, identity=who, allowed=True, enforce=False, limit=2, window=window,
        count=3.0, remaining=0, retry_after=5.0, reset=5.0,
    )  # fmt: skip


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [m for m in caplog.messages if "shadow policy" in m]


def test_one_line_per_client_and_window_then_the_count_of_the_quiet_ones(caplog):
    clock = Clock()
    log = ShadowLog(clock=clock)
    with caplog.at_level(logging.INFO, logger="ratelimits"):
        for _ in range(50):
            log.would_deny(would_deny("ip:203.0.113.7"))
        log.would_deny(would_deny("ip:203.0.113.8"))
        log.would_deny(would_deny("ip:203.0.113.7", name="other"))
        assert len(lines(caplog)) == 3  # one per (policy, client)
        clock.now += 61  # the window is over: logged again, with what was not
        log.would_deny(would_deny("ip:203.0.113.7"))
    assert lines(caplog)[-1] == (
        "ratelimits: shadow policy shadowed would deny ip:203.0.113.7 (3 of 2 per 60 s); "
        "let through. 49 more since the last line."
    )


def test_a_long_window_is_quiet_for_an_hour_at_most(caplog):
    clock = Clock()
    log = ShadowLog(clock=clock)
    with caplog.at_level(logging.INFO, logger="ratelimits"):
        log.would_deny(would_deny("u:42", window=31 * 86400))  # a calendar month
        clock.now += QUIET_MAX - 1
        log.would_deny(would_deny("u:42", window=31 * 86400))
        clock.now += 2
        log.would_deny(would_deny("u:42", window=31 * 86400))
    assert len(lines(caplog)) == 2


def test_minted_identities_cannot_grow_memory_or_the_log(caplog):
    """A client sending a new X-Api-Key per request: the table stays at its capacity, and
    the clients it cannot take are summed in one line per policy per interval."""
    clock = Clock()
    log = ShadowLog(capacity=100, clock=clock)
    with caplog.at_level(logging.INFO, logger="ratelimits"):
        for n in range(5000):
            log.would_deny(would_deny(f"h:{n:032x}", window=600))
        assert len(log) == 100
        assert len(lines(caplog)) == 101  # 100 clients, then one summary
        assert "would deny 1 requests of clients not logged one by one" in lines(caplog)[-1]
        clock.now += SUMMARY_INTERVAL
        log.would_deny(would_deny("h:" + "f" * 32, window=600))
    assert len(log) == 100  # their quiet time is not over: none was dropped
    assert lines(caplog)[-1].startswith(
        "ratelimits: shadow policy shadowed would deny 4900 requests of clients not logged"
    )
    clock.now += 600  # every quiet time is over: the next client is logged again
    log.would_deny(would_deny("h:" + "e" * 32, window=600))
    assert len(log) == 1


def test_the_limiter_logs_a_shadow_policy_once_per_client(caplog):
    shadowed = policy("sliding_log", 1, 60, name="shadowed", mode="shadow")
    with caplog.at_level(logging.INFO, logger="ratelimits"):
        verdicts = [limiter.decide([Check(shadowed, "ip:198.51.100.1")]) for _ in range(20)]
    assert all(v.allowed for v in verdicts)
    assert sum(d.shadow_denied for v in verdicts for d in v.decisions) == 19
    assert len(lines(caplog)) == 1
