"""The decide reply tells which policy's lockout this call started (``allowed`` = 2), once
per lock, in the same one call; every reader takes it as a denial."""

from __future__ import annotations

import pytest

from ratelimits.engine import limiter
from ratelimits.engine.policy.compiled import Check
from tests.helpers import IDENTITY, hit, hit_all, policy

pytestmark = pytest.mark.usefixtures("backend")

START = 1_800_000_000.0


@pytest.mark.parametrize("algorithm", ["sliding_log", "compact_log", "fixed_window"])
def test_only_the_denial_that_starts_the_lock_says_so(algorithm):
    p = policy(algorithm, limit=2, window=60, lockout=300)
    seen = [hit(p, START + i) for i in range(5)]
    assert [d.allowed for d in seen] == [True, True, False, False, False]
    assert [d.lockout_started for d in seen] == [False, False, True, False, False]
    # After the lock, the next one starts again.
    assert hit(p, START + 400).allowed and hit(p, START + 401).allowed
    assert hit(p, START + 402).lockout_started


def test_no_lockout_no_start():
    p = policy("sliding_log", limit=1, window=60)
    assert [hit(p, START + i).lockout_started for i in range(3)] == [False, False, False]


def test_the_start_is_per_policy_shadow_ones_too():
    locking = policy("sliding_log", limit=1, window=60, lockout=300, name="locking")
    plain = policy("sliding_log", limit=10, window=60, name="plain")
    shadow = policy("sliding_log", limit=1, window=60, lockout=300, name="shadow", mode="shadow")
    hit_all([locking, plain], START)
    verdict = hit_all([locking, plain], START + 1)
    assert [(d.policy, d.allowed, d.lockout_started) for d in verdict.decisions] == [
        ("locking", False, True),
        ("plain", True, False),
    ]
    # A shadow policy's lock starts too (it denies nothing): the admitted request reads
    # its decision as a denial.
    hit(shadow, START)
    found = hit_all([plain, shadow], START + 2)
    assert found.allowed
    assert [(d.policy, d.allowed, d.lockout_started) for d in found.decisions] == [
        ("plain", True, False),
        ("shadow", False, True),
    ]


def test_a_remembered_denial_never_says_it_started_a_lock():
    p = policy("sliding_log", limit=1, window=10, lockout=30)
    assert limiter.decide([Check(p, IDENTITY)]).allowed
    assert limiter.decide([Check(p, IDENTITY)]).decisions[0].lockout_started
    again = limiter.decide([Check(p, IDENTITY)]).decisions[0]
    assert again.cached and not again.lockout_started
