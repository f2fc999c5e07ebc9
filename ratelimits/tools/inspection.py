"""One key's full state, read-only: every log entry, both counter windows, the fixed window
(a calendar period), a token bucket's arrival time, every concurrency lease, the client's
lockout.

Everything is read in one ``MULTI`` transaction together with Redis ``TIME`` and the
decide script run with recording off, so the raw state, the clock and the limiter's own
answer describe the same instant. The lockout's key shares the counts' hash tag, so it is
read in the same transaction (on a cluster, on the same node). A lockout's own key is
read as such: when it ends.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis

from ratelimits.engine import algorithms, limiter
from ratelimits.engine.decision import Decision
from ratelimits.engine.keys import names as keys
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.store import connection
from ratelimits.engine.store.connection import Client
from ratelimits.tools.applied_rules import Applied
from ratelimits.tools.inventory import lock_to_read, policy_check
from ratelimits.tools.key_timing import Lockout, NextReset, lockout_from, next_reset, period_of
from ratelimits.tools.leases import Lease, parse
from ratelimits.tools.snapshots import read_together


@dataclass(frozen=True, slots=True)
class Window:
    """A clock-aligned window or a calendar period: ``label`` is ``current``, ``previous``
    or ``expired``."""

    label: str
    start_us: int
    end_us: int
    count: int


@dataclass(frozen=True, slots=True)
class KeyDetail:
    """The state of one key at ``now_us`` (Redis ``TIME``).

    ``entries`` (sliding_log, compact_log) are admission times in microseconds, oldest first;
    ``windows`` (sliding_counter, fixed_window) the stored windows; ``leases``
    (concurrency) every stored lease, oldest first, the ended ones too. ``decision`` is
    what the policy would answer for one more request now. ``lockout`` is the client's
    lockout while it lasts; ``next_reset`` when a calendar policy's counts next reset.
    """

    name: keys.KeyName
    exists: bool
    now_us: int
    ttl: float | None
    memory: int | None
    policy: CompiledPolicy | None
    decision: Decision | None
    note: str = ""
    entries: list[int] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    leases: list[Lease] = field(default_factory=list)
    #: The hash as stored (sliding_counter, fixed_window), for keys without a policy; for
    #: token_bucket its theoretical arrival time in microseconds, as "tat".
    raw: dict[str, str] = field(default_factory=dict)
    rule: Applied | None = None
    lockout: Lockout | None = None
    next_reset: NextReset | None = None


def memory_of(node: redis.Redis, key: str) -> int | None:
    """``MEMORY USAGE`` of ``key``; ``None`` where the server refuses it (an ACL, a
    managed service): outside the transaction, whose every reply it would take down."""
    try:
        found = node.memory_usage(key)
    except redis.ResponseError:
        return None
    return None if found is None else int(found)


def inspect(
    client: Client,
    name: keys.KeyName,
    policies: dict[str, CompiledPolicy],
    previous: Sequence[str] = (),
) -> KeyDetail:
    """Read ``name``'s state without changing it. ``previous``: its client's identity
    under each ``SECRET_KEY_FALLBACKS`` key, when known (an override hashed before a key
    rotation then applies, as on the request path)."""
    check, rule, note = policy_check(name, policies, previous)
    stored = None if name.lock else algorithms.get(name.algorithm).state
    lock = None if name.lock else lock_to_read(name, policies)

    def queue(pipe: Any) -> None:
        pipe.time()
        pipe.exists(name.key)
        pipe.pttl(name.key)
        pipe.type(name.key)
        if stored in ("log", "leases"):
            pipe.zrange(name.key, 0, -1, withscores=True)
        elif stored in ("ring", "tat") or name.lock:
            pipe.get(name.key)
        else:
            pipe.hgetall(name.key)
        if lock is not None:
            pipe.get(lock)
        if check is not None:
            limiter.queue_peek([check], pipe)

    # One moment on the key's server (on a cluster, the node holding its slot).
    node = connection.node_client(client, name.key)
    now, exists, pttl, stored_type, state, *rest = read_together(node, queue)
    for reply in (now, exists, pttl, stored_type):
        if isinstance(reply, Exception):
            raise reply
    memory = memory_of(node, name.key)
    held = rest.pop(0) if lock is not None else (state if name.lock else None)
    foreign = _foreign_type([state, *rest], stored_type.decode(), name.algorithm or "a lockout")
    decision = None
    if check is not None and not foreign:
        decision = limiter.verdict_from([check], rest[0])[1].decisions[0]
    now_us = int(now[0]) * 1_000_000 + int(now[1])
    policy = policies.get(name.policy)
    detail = KeyDetail(
        name=name,
        exists=bool(exists),
        now_us=now_us,
        ttl=pttl / 1000 if pttl >= 0 else None,
        memory=memory,
        policy=policy,
        decision=decision,
        note="; ".join(filter(None, [note, foreign])),
        rule=rule,
        lockout=None if isinstance(held, Exception) else lockout_from(held, now_us),
        next_reset=next_reset(policy, now_us) if policy is not None else None,
    )
    if foreign or name.lock:
        return detail
    if stored == "log":
        detail.entries.extend(int(score) for _, score in state)
    elif stored == "ring":
        detail.entries.extend(ring_entries(state))
    elif stored == "leases":
        detail.leases.extend(parse(state))
    elif stored == "tat":
        if state is not None:  # the theoretical arrival time, in microseconds
            detail.raw["tat"] = state.decode()
    elif state:
        detail.raw.update((k.decode(), v.decode()) for k, v in state.items())
        if check is not None:  # windows only mean something under the policy's settings
            detail.windows.extend(_windows(name.algorithm, state, detail.policy, detail.now_us))
    return detail


def _foreign_type(replies: list[object], stored_type: str, algorithm: str) -> str:
    """A note when the key holds a value of a type ``algorithm`` does not store, else "".

    Other error replies are raised: they mean Redis failed, not that the key is foreign.
    """
    errors = [r for r in replies if isinstance(r, Exception)]
    if not errors:
        return ""
    if not all(_is_foreign(str(e)) for e in errors):
        raise errors[0]
    return (
        f"the key holds a Redis {stored_type} that {algorithm} cannot read: "
        "requests under it get the policy's fail mode until the key is deleted"
    )


def _is_foreign(error: str) -> bool:
    """Redis's wrong-type error, or a log script's refusal of a value it did not write
    (a bad ring, a sorted set of other members). Redis 7 answers a function's wrong-type
    error as it is; Redis 6.2 wraps a script's in "Error running script (call to ...):
    @user_script:N: WRONGTYPE ..."."""
    return any(
        sign in error
        for sign in (
            "WRONGTYPE Operation against a key",
            "does not hold a compact_log ring",
            "does not hold a sliding_log",
        )
    )


def is_log(algorithm: str) -> bool:
    """True for the algorithms that keep one entry per admission."""
    return algorithms.keeps_entries(algorithm)


#: The bytes of a compact_log ring's header.
_RING_HEADER = 25


def ring_entries(blob: bytes | None) -> list[int]:
    """A compact_log ring's admission times, oldest first, one per admitted request (see
    ``lua/compact_log.lua``: a 25-byte header, big-endian, of the slots' width, head and
    size, base position and anchor time, then slots of a time and an end position:
    narrow, 8 bytes, the time modulo 2^48 before the anchor; or wide, 16 bytes, as
    doubles). Empty for a missing or malformed value."""
    if not blob or len(blob) < _RING_HEADER:
        return []
    width, head, size, _, anchor = struct.unpack_from(">BIIdd", blob)
    capacity, extra = divmod(len(blob) - _RING_HEADER, width) if width in (8, 16) else (0, 1)
    if extra or head >= capacity or size > capacity:
        return []
    times = []
    for k in range(size):
        offset = _RING_HEADER + width * ((head + k) % capacity)
        if width == 8:  # a uint48, then the end (not needed here)
            stored = int.from_bytes(blob[offset : offset + 6], "big")
            times.append(int(anchor) - (int(anchor) - stored) % 2**48)
        else:
            times.append(int(struct.unpack_from(">d", blob, offset)[0]))
    return times


def iso(time_us: int) -> str:
    """A Redis timestamp in microseconds as ISO 8601 UTC, to the millisecond; a number
    out of the calendar's range (a stored value that is no time) as it is."""
    try:
        moment = datetime.fromtimestamp(time_us / 1_000_000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return str(time_us)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _windows(
    algorithm: str, stored: dict[bytes, bytes], policy: CompiledPolicy, now_us: int
) -> list[Window]:
    if policy.calendar:
        return [_period(stored, policy, now_us)]
    window_us = policy.window * 1_000_000
    current = now_us // window_us
    index = int(stored.get(b"w", b"0"))
    found = [(index, int(stored.get(b"c", b"0")))]
    previous = algorithms.get(algorithm).previous_window
    if previous:
        found.append((index - 1, int(stored.get(b"p", b"0"))))
    windows = []
    for at, count in found:
        if at == current:
            label = "current"
        elif at == current - 1 and previous:
            label = "previous"
        else:
            label = "expired"
        windows.append(Window(label, at * window_us, (at + 1) * window_us, count))
    return windows


def _period(stored: dict[bytes, bytes], policy: CompiledPolicy, now_us: int) -> Window:
    """A calendar policy's stored count: ``w`` is its period's start in microseconds
    (``lua/fixed_window.lua``), current when it is the start of the period holding now."""
    start_us = int(stored.get(b"w", b"0"))
    current, end_us = period_of(policy, now_us)
    if start_us != current:
        start_us, end_us = period_of(policy, start_us)  # the stored period's own end
    label = "current" if start_us == current else "expired"
    return Window(label, start_us, end_us, int(stored.get(b"c", b"0")))
