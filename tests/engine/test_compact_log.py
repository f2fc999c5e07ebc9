"""compact_log: the exact log in a ring. It must decide exactly as sliding_log does, in
8 bytes per admitted request in the window whatever its cost (16 while the ring holds
65,536 units or more)."""

from __future__ import annotations

import logging
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ratelimits.engine import limiter
from ratelimits.engine.decision import Decision
from ratelimits.engine.store import connection
from ratelimits.testing.replay import queue_decide
from ratelimits.testutils import reset_state
from tests.helpers import IDENTITY, hit, policy

pytestmark = pytest.mark.usefixtures("backend")


HEADER = 25
NARROW, WIDE = 8, 16


def ring_width(redis_client, key: str) -> int:
    """The bytes of the ring's slots: 8 (narrow) or 16 (wide)."""
    return redis_client.getrange(key, 0, 0)[0]


def ring_capacity(redis_client, key: str) -> int:
    """The ring's slots, held or free."""
    return (redis_client.strlen(key) - HEADER) // ring_width(redis_client, key)


def ring_entries(redis_client, key: str) -> list[tuple[int, int]]:
    """The ring's entries, oldest first, as (time, units) (as the Lua code lays them out:
    a header of width, head, size, base and anchor, then slots of time and end position,
    narrow ones modulo 2^48 and 2^16)."""
    blob = redis_client.get(key)
    width, head, size, base, anchor = struct.unpack(">BIIdd", blob[:HEADER])
    capacity = (len(blob) - HEADER) // width
    entries, before = [], base
    for k in range(size):
        offset = HEADER + width * ((head + k) % capacity)
        if width == NARROW:
            time, end = struct.unpack(">QH", b"\0\0" + blob[offset : offset + 8])
            time = anchor - (anchor - time) % 2**48
            end = base + (end - base) % 2**16
        else:
            time, end = struct.unpack(">dd", blob[offset : offset + 16])
        entries.append((int(time), int(end - before)))
        before = end
    return entries


def ring_times(redis_client, key: str) -> list[int]:
    """The times of the ring's entries, oldest first."""
    return [time for time, _ in ring_entries(redis_client, key)]


def same(a: Decision, b: Decision) -> bool:
    return (a.allowed, a.count, a.remaining, a.retry_after, a.reset) == (
        b.allowed,
        b.count,
        b.remaining,
        b.retry_after,
        b.reset,
    )


# A request: (seconds since the previous one, the limit in force).
steps = st.lists(
    st.tuples(
        st.one_of(st.just(0.0), st.floats(0.0, 3.0), st.floats(5.0, 25.0)),
        st.sampled_from([1, 2, 3, 5, 8]),
    ),
    min_size=1,
    max_size=80,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(trace=steps)
def test_decides_exactly_as_sliding_log(trace, redis_client):
    """Every field of every decision matches, through bursts, idle gaps, equal timestamps
    and limit changes (lowered, raised, lowered then raised again)."""
    redis_client.flushall()
    reset_state()
    now = 10_000.0
    for gap, limit in trace:
        now = round(now + gap, 6)
        exact = hit(policy("sliding_log", limit=limit, window=10), now)
        ring = hit(policy("compact_log", limit=limit, window=10), now)
        assert same(ring, exact), (now, limit, exact, ring)


def test_decides_as_sliding_log_past_the_ring_read_whole(redis_client):
    """A ring of up to 4 KB (508 narrow slots) is read and written whole; past that, slot
    by slot: the decisions are the same on both sides of the boundary, denials included."""
    exact_policy = policy("sliding_log", limit=600, window=10)
    ring_policy = policy("compact_log", limit=600, window=10)
    times = [100 + i * 0.01 for i in range(600)]  # the ring grows past 508 slots
    times += [106.5, 106.5]  # full: denied, told when the oldest leaves
    times += [110.0 + i * 0.01 for i in range(8)]  # the oldest leave one by one
    times += [110.075, 125.0, 125.0]  # and all of them
    key = ring_policy.key_for(IDENTITY)
    decided, lengths = [], []
    for now in times:
        now = round(now, 6)
        exact, ring = hit(exact_policy, now), hit(ring_policy, now)
        assert same(ring, exact), (now, exact, ring)
        decided.append(ring.allowed)
        lengths.append(redis_client.strlen(key))
    assert decided.count(False) >= 2 and decided[-1]
    assert max(lengths) == HEADER + 8 * 600  # past 4 KB, grown to the limit
    assert lengths[-1] == HEADER + 8 * 2  # all left: read whole again, its 2 entries


@pytest.mark.parametrize(("cost", "limit"), [(1, 20), (3, 60)])
def test_sliding_log_read_whole_or_by_rank_decides_the_same(redis_client, cost, limit):
    """sliding_log reads a log of up to 2 entries whole, a longer one at its head, its
    newest entry and by rank: the decisions, denials and their waits included, are the
    ring's on both sides."""
    exact_policy = policy("sliding_log", limit=limit, window=10)
    ring_policy = policy("compact_log", limit=limit, window=10)
    times = [100 + i * 0.1 for i in range(25)]  # past 2 entries, then denied
    times += [103.0, 103.0, 110.05, 110.25, 111.0, 112.55, 130.0]
    decided = []
    for now in times:
        now = round(now, 6)
        exact = limiter.decide([limiter.Check(exact_policy, IDENTITY, cost=cost)], now=now)
        ring = limiter.decide([limiter.Check(ring_policy, IDENTITY, cost=cost)], now=now)
        exact, ring = exact.decisions[0], ring.decisions[0]
        assert same(ring, exact), (now, exact, ring)
        decided.append(exact.allowed)
    assert False in decided and decided[-1]


@pytest.mark.parametrize("unit", [1, 3])
def test_sliding_log_past_its_head_decides_as_the_ring(redis_client, unit):
    """A log longer than the 2 entries read at its head: a denial whose wait lies past
    them, entries gone from the window since the last admission (1, then 19: the oldest
    in the window is then in the head, then past it), and a log whose entries all left.
    Decisions and waits are the ring's; each admission drops what left the window."""
    limit = 40 * unit
    exact_policy = policy("sliding_log", limit=limit, window=10)
    ring_policy = policy("compact_log", limit=limit, window=10)
    steps = [(100 + i * 0.1, unit) for i in range(40)]  # full: 40 entries
    steps += [(104.5, unit), (104.5, 20 * unit)]  # denied: the 1st, then the 20th leaves
    steps += [(110.05, unit)]  # the 1st left: the oldest in the window is the 2nd
    steps += [(111.95, limit), (111.95, unit)]  # 19 left: the oldest in the window is past
    steps += [(111.96, unit), (125.0, unit), (125.0, unit)]  # the head; then all left
    allowed = []
    for now, cost in steps:
        exact = limiter.decide([limiter.Check(exact_policy, IDENTITY, cost=cost)], now=now)
        ring = limiter.decide([limiter.Check(ring_policy, IDENTITY, cost=cost)], now=now)
        exact, ring = exact.decisions[0], ring.decisions[0]
        assert same(ring, exact), (now, cost, exact, ring)
        allowed.append(exact.allowed)
    assert allowed[40:] == [False, False, True, False, True, True, True, True]
    assert redis_client.zcard(exact_policy.key_for(IDENTITY)) == 2


def test_a_full_ring_at_limit_1000_is_under_8_5_kb(redis_client):
    """8 bytes a request: 8,264 B on Redis 7, 8,112 on Valkey 9, 8,120 on Redis 6.2 (16,456
    on Redis 7 with 16-byte slots)."""
    p = policy("compact_log", limit=1000, window=3600)
    key = p.key_for(IDENTITY)
    # The key's node (on a cluster, pipelines of scripts go to one node).
    pipe = connection.node_client(redis_client, key).pipeline(transaction=False)
    for i in range(1000):
        queue_decide([limiter.Check(p, IDENTITY)], pipe, now=5000 + i * 0.001)
    assert all(reply[0] == 1 for reply in pipe.execute())
    assert not hit(p, 5001.5).allowed
    assert redis_client.strlen(key) == HEADER + 8 * 1000  # grown by quarters, up to the limit
    assert redis_client.memory_usage(key, samples=0) <= 8_500
    log = policy("sliding_log", limit=1000, window=3600)
    for i in range(1000):
        queue_decide([limiter.Check(log, IDENTITY)], pipe, now=5000 + i * 0.001)
    pipe.execute()
    # A sliding_log of as many entries is over 9 times larger (11.4 on Redis 7, 9.7 on
    # Valkey 9, 12.8 on Redis 6.2).
    ring = redis_client.memory_usage(key, samples=0)
    assert redis_client.memory_usage(log.key_for(IDENTITY), samples=0) > 9 * ring


def test_the_ring_holds_only_the_window_until_it_is_full(redis_client):
    p = policy("compact_log", limit=1000, window=10)
    key = p.key_for(IDENTITY)
    for t in (100, 101, 102):
        assert hit(p, t).allowed
    assert redis_client.strlen(key) == HEADER + 8 * 3  # read whole: exactly its entries
    assert hit(p, 111.5).allowed  # 100 and 101 have left the window: dropped
    assert ring_times(redis_client, key) == [102_000_000, 111_500_000]
    assert redis_client.strlen(key) == HEADER + 8 * 2


def test_a_full_ring_drops_the_entries_that_left_the_window(redis_client):
    p = policy("compact_log", limit=3, window=10)
    key = p.key_for(IDENTITY)
    for t in (100, 101, 102):
        assert hit(p, t).allowed
    denied = hit(p, 105)
    assert not denied.allowed and denied.retry_after == pytest.approx(5)
    assert hit(p, 110).allowed
    assert hit(p, 111).allowed
    assert ring_times(redis_client, key) == [102_000_000, 110_000_000, 111_000_000]
    assert redis_client.strlen(key) == HEADER + 8 * 3


def test_a_clock_that_steps_back_keeps_the_ring_in_order(redis_client):
    p = policy("compact_log", limit=3, window=10)
    key = p.key_for(IDENTITY)
    assert hit(p, 100).allowed
    assert hit(p, 99).allowed  # stored as the newest time seen, 100
    assert ring_times(redis_client, key) == [100_000_000, 100_000_000]
    assert hit(p, 100.5).allowed
    assert not hit(p, 109.9).allowed
    assert hit(p, 110).allowed


def test_a_foreign_value_fails_by_the_policy_not_with_a_500(redis_client, caplog):
    p = policy("compact_log", limit=3, window=10, fail_open=False)
    redis_client.set(p.key_for(IDENTITY), b"not a ring")
    with caplog.at_level(logging.ERROR, logger="ratelimits"):
        verdict = limiter.decide([limiter.Check(p, IDENTITY)])
    assert verdict.decisions[0].failed and not verdict.allowed
    assert "does not hold a compact_log ring" in caplog.text


def decide_both(limit: int, window: int, steps: list[tuple[float, int]]) -> list[bool]:
    """Each (time, cost) of ``steps`` decided by sliding_log and compact_log: every field of
    every decision must match. Returns the admissions."""
    exact_policy = policy("sliding_log", limit=limit, window=window)
    ring_policy = policy("compact_log", limit=limit, window=window)
    allowed = []
    for now, cost in steps:
        now = round(now, 6)
        exact = limiter.decide([limiter.Check(exact_policy, IDENTITY, cost=cost)], now=now)
        ring = limiter.decide([limiter.Check(ring_policy, IDENTITY, cost=cost)], now=now)
        exact, ring = exact.decisions[0], ring.decisions[0]
        assert same(ring, exact), (now, cost, exact, ring)
        allowed.append(exact.allowed)
    return allowed


def test_heavy_entries_among_cost_1_ones_stay_narrow(redis_client):
    """Narrow slots hold any cost while the ring holds under 65,536 units: heavy entries
    among cost-1 ones decide as sliding_log's, over windows whose positions pass several
    multiples of 2^16 (the ends are stored modulo 2^16)."""
    key = policy("compact_log", limit=60_000, window=10).key_for(IDENTITY)
    steps = []
    for round_ in range(4):  # 110,002 units a round: the ends pass a multiple of 2^16
        start = 100 + 30 * round_
        steps += [(start, 1), (start + 1, 20_000), (start + 2, 1), (start + 3, 30_000)]
        steps += [(start + 4, 10_000), (start + 5, 9_998), (start + 5, 1), (start + 6, 1)]
        steps += [(start + 11.5, 20_001), (start + 13.5, 30_001), (start + 13.5, 1)]
    allowed = decide_both(60_000, 10, steps)
    # Full at 60,000 with the 9,998; at 11.5 the 20,000 has left, at 13.5 the 30,000.
    assert allowed == [True, True, True, True, False, True, False, False, True, True, False] * 4
    assert ring_width(redis_client, key) == NARROW
    assert [units for _, units in ring_entries(redis_client, key)] == [9_998, 20_001, 30_001]


def test_a_ring_holding_2_16_units_turns_wide_and_narrow_again(redis_client):
    """600 entries of cost 1 (read slot by slot), then one of 70,000: the ring is
    rewritten wide and decides as sliding_log (denials searching wide slots); once it
    holds under 2^15 units at a rewrite it is narrow again."""
    key = policy("compact_log", limit=200_000, window=10).key_for(IDENTITY)
    steps = [(100 + i * 0.01, 1) for i in range(600)]
    allowed = decide_both(200_000, 10, steps)
    assert all(allowed) and ring_width(redis_client, key) == NARROW
    assert decide_both(200_000, 10, [(107.0, 70_000)]) == [True]
    assert ring_width(redis_client, key) == WIDE
    assert ring_capacity(redis_client, key) == 601 + 150  # a quarter over its entries
    entries = ring_entries(redis_client, key)
    assert len(entries) == 601 and entries[-1] == (107_000_000, 70_000)
    steps = [(107.5, 129_399), (107.5, 129_400), (107.6, 130_000), (108.0, 1)]
    assert decide_both(200_000, 10, steps) == [True, False, False, True]
    assert ring_width(redis_client, key) == WIDE  # in place: 603 entries, 751 slots
    # 117.05: the 129,399 and 108.0's unit stay, rewritten (3 entries: under half) wide.
    assert decide_both(200_000, 10, [(117.05, 1)]) == [True]
    assert ring_width(redis_client, key) == WIDE and ring_capacity(redis_client, key) == 3
    # 118.5: 117.05's unit stays: 2 units, rewritten narrow; 118.6's turns it wide again.
    assert decide_both(200_000, 10, [(118.5, 1)]) == [True]
    assert ring_width(redis_client, key) == NARROW
    steps = [(118.6, 199_997), (118.6, 1), (119.0, 1)]
    assert decide_both(200_000, 10, steps) == [True, True, False]
    assert [units for _, units in ring_entries(redis_client, key)] == [1, 1, 199_997, 1]
    assert ring_width(redis_client, key) == WIDE
    assert decide_both(200_000, 10, [(128.7, 5)]) == [True]
    assert ring_width(redis_client, key) == NARROW


def test_the_ring_grows_by_quarters_and_shrinks_under_half_full(redis_client):
    """Past 4 KB a ring is a quarter over its entries when rewritten: it grows when full,
    is written in place between half and full, and shrinks under half full (to exactly
    its entries once it is read whole again)."""
    key = policy("compact_log", limit=2000, window=10).key_for(IDENTITY)
    assert all(decide_both(2000, 10, [(100 + i * 0.005, 1) for i in range(1000)]))
    # Exactly its entries up to 508, then 636, 796, 996 and 1,246 slots.
    assert ring_capacity(redis_client, key) == 1246
    assert decide_both(2000, 10, [(111.0, 1)]) == [True]  # 800 entries: in place
    assert ring_capacity(redis_client, key) == 1246
    assert len(ring_entries(redis_client, key)) == 800
    assert decide_both(2000, 10, [(112.0, 1)]) == [True]  # 601 entries: under half
    assert ring_capacity(redis_client, key) == 601 + 150
    assert decide_both(2000, 10, [(112.0, 1400), (112.0, 1)]) == [False, True]
    assert decide_both(2000, 10, [(114.5, 1)]) == [True]  # 103 entries: read whole
    assert ring_capacity(redis_client, key) == len(ring_entries(redis_client, key)) == 103


def test_window_boundaries_decide_as_sliding_log(redis_client):
    """An entry leaves its window exactly a window after its time, (now - window, now]:
    a microsecond before, it still counts, and the wait told is to that microsecond."""
    steps = [(100.0, 1), (100.0, 1), (105.0, 1), (109.999999, 1), (110.0, 2), (110.0, 1)]
    steps += [(114.999999, 1), (115.0, 1), (120.0, 3), (130.0, 3)]
    allowed = decide_both(3, 10, steps)
    assert allowed == [True, True, True, False, True, False, False, True, False, True]


def test_times_across_a_multiple_of_2_48_microseconds(redis_client):
    """Narrow slots keep the time modulo 2^48 µs: entries on both sides of a multiple
    (about 1,407,374,884 s for 5 x 2^48) read back as the times they were admitted at."""
    turn = 5 * 2**48 / 1e6
    steps = [(turn - 2, 1), (turn - 0.5, 1), (turn, 1), (turn + 0.5, 1), (turn + 1, 1)]
    steps += [(turn + 2, 1), (turn + 8.1, 1), (turn + 8.6, 1), (turn + 9.6, 1)]
    assert decide_both(5, 10, steps) == [True] * 5 + [False, True, False, True]
    key = policy("compact_log", limit=5, window=10).key_for(IDENTITY)
    offsets = (0, 500_000, 1_000_000, 8_100_000, 9_600_000)
    assert ring_times(redis_client, key) == [5 * 2**48 + offset for offset in offsets]
