"""Lockouts on exact timelines against the real script: the first denial locks the client
out for ``lockout`` seconds, whatever the window would allow, in the same one call."""

from __future__ import annotations

import pytest

from ratelimits.engine import limiter
from ratelimits.engine.policy.compiled import Check
from tests.helpers import IDENTITY, hit, hit_all, policy

pytestmark = pytest.mark.usefixtures("backend")

LOCKED_ALGORITHMS = [
    "sliding_log",
    "compact_log",
    "sliding_counter",
    "fixed_window",
    "token_bucket",
]


@pytest.mark.parametrize("algorithm", LOCKED_ALGORITHMS)
def test_a_lockout_timeline(algorithm):
    """3 per 60 s, then locked out 900 s: denied until the lockout ends although the
    window frees at 60 s, then admitted."""
    p = policy(algorithm, limit=3, window=60, lockout=900)
    start = 1_800_000_000.0  # a window boundary for every window here
    for i in range(3):
        assert hit(p, start + i).allowed
    first = hit(p, start + 3)
    assert not first.allowed
    assert first.retry_after == pytest.approx(900)
    later = hit(p, start + 200)  # the window alone would admit by now
    assert not later.allowed
    assert later.remaining == 0
    assert later.retry_after == pytest.approx(703)
    # The lock does not grow with requests made during it.
    assert hit(p, start + 902.999).retry_after == pytest.approx(0.001, abs=0.002)
    assert hit(p, start + 903).allowed


def test_the_lock_lives_in_redis_time(redis_client):
    """The lockout is a key with a time to live: on the Redis clock (``now`` only moves
    the counts' clock), a locked client stays denied until the key expires."""
    p = policy("sliding_log", limit=1, window=2, lockout=5)
    assert limiter.decide([Check(p, IDENTITY)]).allowed
    denied = limiter.decide([Check(p, IDENTITY)])
    assert not denied.allowed
    lock = p.key_for(IDENTITY).rsplit(":", 1)[0] + ":lock"
    assert 4500 < redis_client.pttl(lock) <= 5000
    assert denied.retry_after == pytest.approx(5, abs=0.05)


def test_a_denied_request_remembered_by_the_worker_honours_the_lockout():
    p = policy("sliding_log", limit=1, window=10, lockout=30)
    assert limiter.decide([Check(p, IDENTITY)]).allowed
    assert not limiter.decide([Check(p, IDENTITY)]).allowed
    again = limiter.decide([Check(p, IDENTITY)]).decisions[0]
    assert again.cached  # answered by the worker: no round trip until the lock ends
    assert again.retry_after == pytest.approx(30, abs=0.1)


def test_a_lockout_stays_all_or_nothing():
    """A request another policy denies is not counted here and starts no lockout here;
    one this policy denies locks it, and is not counted by the other."""
    login = policy("sliding_log", limit=2, window=60, name="login", lockout=600)
    hourly = policy("sliding_log", limit=1, window=3600, name="hourly")
    start = 2_000_000_000.0
    assert hit_all([login, hourly], start).allowed
    denied = hit_all([login, hourly], start + 1)  # hourly denies; login would admit
    assert not denied.allowed
    assert [d.allowed for d in denied.decisions] == [True, False]
    assert hit(login, start + 2).allowed  # login was not locked: its second
    locked = hit_all([login, hourly], start + 3)
    assert [d.allowed for d in locked.decisions] == [False, False]
    assert locked.decisions[0].retry_after == pytest.approx(600)


def test_a_look_reports_a_lock_and_starts_none():
    p = policy("sliding_log", limit=1, window=60, lockout=120)
    start = 2_100_000_000.0
    assert hit(p, start).allowed
    looked = limiter.decide([Check(p, IDENTITY)], record=False, now=start + 1).decisions[0]
    assert not looked.allowed
    assert looked.retry_after == pytest.approx(59)  # the window's wait: no lock started
    assert not hit(p, start + 2).allowed  # this one locks
    looked = limiter.decide([Check(p, IDENTITY)], record=False, now=start + 70).decisions[0]
    assert not looked.allowed
    assert looked.retry_after == pytest.approx(52)


def test_a_shadow_policy_with_a_lockout_reports_it_and_denies_nothing():
    p = policy("sliding_log", limit=1, window=60, lockout=300, mode="shadow")
    start = 2_200_000_000.0
    assert hit_all([p], start).allowed
    verdict = hit_all([p], start + 1)
    assert verdict.allowed
    assert verdict.decisions[0].shadow_denied
    assert verdict.decisions[0].retry_after == pytest.approx(300)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"lockout": -1}, "lockout must be 0"),
        ({"lockout": 60, "shards": 2}, "one shard"),
        ({"lockout": 60, "algorithm": "concurrency"}, "A concurrency policy has no lockout"),
        # One counter for everyone: one client's denial would lock every client out.
        ({"lockout": 60, "key": "global"}, "A global policy has one counter for everyone"),
    ],
)
def test_the_engine_refuses_a_lockout_it_cannot_keep(fields, message):
    values = {"algorithm": "sliding_log", "limit": 4, "window": 60, **fields}
    with pytest.raises(ValueError, match=message):
        policy(**values)


def test_without_its_lockout_a_policy_reads_the_same_key_by_its_count_alone():
    p = policy("sliding_log", limit=1, window=60, lockout=300)
    unlocked = p.without_lockout()
    assert (unlocked.lockout, unlocked.key_for(IDENTITY)) == (0, p.key_for(IDENTITY))
    assert unlocked.script_args[0][2] == "60000"
    start = 2_300_000_000.0
    assert hit(p, start).allowed
    assert not hit(p, start + 1).allowed  # locks
    looked = limiter.decide([Check(unlocked, IDENTITY)], record=False, now=start + 70)
    assert looked.allowed  # the count alone has room again; the lock is not read
    assert not limiter.decide([Check(p, IDENTITY)], record=False, now=start + 70).allowed
