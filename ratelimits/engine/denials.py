"""Denials a worker answers itself: a client flooding past its limit costs Redis nothing.

The decide script says, for each key, how long it will deny every request whatever
happens elsewhere (its ``blocked_us``): a denied request's retry time, or, after an
admission that used the last unit of quota, the time until the next request fits.
Nothing can shorten that wait but a change outside the script, because only admissions
consume quota and only time frees it. So until then this process denies requests on that
key without a round trip; the answers are the ones Redis would give.

Changes outside the script are a reset of counters, a limit change or any policy edit.
Each one announces itself through the policy table's version stamp, and a worker forgets
every denial when it reloads its table: within ``POLICY_REFRESH_INTERVAL``, the bound
policies already have. Redis losing its data removes the stamp, which reads as a change
too. A reply that left Redis before the change but arrives after it is not remembered (a
generation count guards that).

A remembered denial is Redis's own answer, so it holds while Redis is down too: a policy's
fail mode applies to the requests that need Redis, and a client that Redis had already
denied stays denied until its retry time, fail-open or not.

Times are this process's ``time.monotonic()``, starting when the request was *sent*:
Redis ran the script later, so a remembered denial ends at or before the real one and a
client is never denied longer than Redis would deny it. At most ``LOCAL_DENIALS`` keys
are remembered per process (0 turns this off).

Requests can cost more than one unit. A denial remembers the cost it was for and answers
only requests costing as much or more: a request that needs n units and does not fit
until a time shows that fewer than n are free until then, so one needing more does not
fit either, but a cheaper one may. A denial after an admission that used the last unit
is for cost 1: no request fits until then.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace

from ratelimits.conf import app_settings
from ratelimits.engine.decision import Decision, Verdict
from ratelimits.engine.policy.compiled import Check

# (policy, identity, shard, limit): the limit too, because overrides can give clients
# sharing one key (users behind one address, under a per-address policy) different limits.
_Slot = tuple[str, str, int, int]

_lock = threading.Lock()
# slot -> (until, the least cost it denies, the denial)
_until: dict[_Slot, tuple[float, int, Decision]] = {}
_generation = 0


def _slot(check: Check) -> _Slot:
    return (check.policy.name, check.identity, check.shard, check.policy.limit)


def generation() -> int:
    """Read before sending a request to Redis; pass to :func:`remember` with its reply."""
    return _generation


def lookup(checks: Sequence[Check], now: float) -> Verdict | None:
    """The denial of a request that a remembered key still blocks at ``now``, else ``None``.

    The verdict holds the blocking decisions only: the request is denied whatever the
    other policies would say, and nothing is counted anywhere."""
    if not _until:
        return None
    found = []
    for check in checks:
        entry = _until.get(_slot(check))
        if entry is not None and entry[0] > now and check.units >= entry[1]:
            wait = entry[0] - now
            found.append(replace(entry[2], retry_after=wait, reset=wait))
    return Verdict(tuple(found)) if found else None


def remember(check: Check, decision: Decision, blocked_s: float, sent_at: float, seen: int) -> None:
    """``check``'s key denies every request for ``blocked_s`` seconds from ``sent_at``;
    ``seen`` is :func:`generation` as it was when the request was sent. A denied
    ``decision`` blocks requests of ``check``'s cost or more; an admitted one (that used
    the last unit) blocks every request."""
    if not decision.enforce or blocked_s <= 0:
        return
    capacity = int(app_settings.LOCAL_DENIALS)
    if capacity <= 0:
        return
    units = check.units
    denial = replace(
        decision,
        allowed=False,
        count=decision.count + (units if decision.allowed else 0),
        remaining=0,
        retry_after=blocked_s,
        reset=blocked_s,
        cached=True,
        lockout_started=False,
    )
    slot = _slot(check)
    with _lock:
        if seen != _generation:
            return  # the state changed while the reply was on its way
        if len(_until) >= capacity and slot not in _until:
            _make_room(sent_at, capacity)
        _until[slot] = (sent_at + blocked_s, 1 if decision.allowed else units, denial)


def _make_room(now: float, capacity: int) -> None:
    """Drop what has expired; if that is not enough, start over (called with the lock)."""
    for slot in [slot for slot, (until, _, _) in _until.items() if until <= now]:
        del _until[slot]
    if len(_until) >= capacity:
        _until.clear()


def clear() -> None:
    """Forget every denial (the policy table changed or counters were reset)."""
    global _generation
    with _lock:
        _generation += 1
        _until.clear()


def size() -> int:
    """How many keys this process remembers (for tests and the benchmarks)."""
    return len(_until)
