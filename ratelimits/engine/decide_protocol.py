"""The decide call as ``lua/decide.lua``'s header gives it: what it sends for a request's
checks (its keys and arguments, which :mod:`ratelimits.engine.store.commands` sends) and
what it answers (its reply, read in one place).

On the request path the arguments are bytes each policy packed ahead
(``Check.wire_args``), behind a head shared by every request; a replayed time (tests,
the tools' timelines) packs them again, since a calendar period depends on the time.

The reply::

    {admitted, now_us, then for each policy i: allowed, count x 1000, remaining,
     retry_ms, reset_ms, blocked_us}

A reply merged from several calls (a cluster's hash slots: :func:`merged`) carries, after
the policies' fields, each policy's own call time in microseconds (:func:`call_time_us`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.store import commands
from ratelimits.engine.store.commands import bulk_strings

# What the call sends.

#: Arguments per policy: algorithm, limit, window_ms, enforce, burst, cost.
POLICY_SLOTS = 6
#: The decide function's second argument: record, only look, or give back
#: (``lua/give_back.lua``).
RECORD, LOOK, GIVE_BACK = "1", "0", "2"

#: The arguments in front of the policies' own: now (``""``: the Redis clock) and record.
_HEADS = {record: bulk_strings(["", RECORD if record else LOOK]) for record in (True, False)}


def decide_call(
    checks: Sequence[Check],
    *,
    record: bool = True,
    now: float | None = None,
    keys: list[str] | None = None,
) -> commands.DecideCall:
    """The one call that decides ``checks`` (``keys``: their keys, when known already):
    recording or only looking, at ``now`` (seconds) or on the Redis clock."""
    if keys is None:
        keys = [check.key for check in checks]
    count = 2 + POLICY_SLOTS * len(checks)
    if now is not None:  # a replayed time: calendar periods are the time's, not the clock's
        packed = bulk_strings(arguments(checks, record, now))
    else:
        packed = _HEADS[record] + b"".join([check.wire_args for check in checks])
    return commands.decide_call(keys, packed, count, read_only=not record)


def arguments(checks: Sequence[Check], record: bool, now: float | None) -> list[str]:
    """The call's arguments as strings (for redis-py's clients and pipelines)."""
    args = ["" if now is None else str(round(now * 1_000_000)), RECORD if record else LOOK]
    for check in checks:
        args.extend(check.policy.args_at(now)[check.shard][:-1])
        args.append(str(check.units))
    return args


def give_back_arguments(
    checks: Sequence[Check], times_us: Sequence[int], marks: Sequence[int]
) -> list[str]:
    """The arguments that give back what ``checks`` (one hash slot) recorded at
    ``times_us`` (their calls' Redis times; the first stands for the call), each with the
    count its call replied (``marks``): see ``lua/give_back.lua``."""
    args = [str(times_us[0]), GIVE_BACK]
    for check, at_us, mark in zip(checks, times_us, marks, strict=True):
        algorithm, limit, window_ms, _, burst, _ = check.policy.args_at(at_us / 1_000_000)[
            check.shard
        ]
        # A sign-in policy that resets on success clears the key (``"r"``), only given
        # back after a sign-in that did not fail (``Receipt.due``).
        mark_slot = "r" if check.policy.reset_on_success else str(mark)
        args += [algorithm, limit, window_ms, mark_slot, burst, str(check.units)]
    return args


# What the call answers.

#: Fields per policy, and where each is among them.
FIELDS = 6
ALLOWED, COUNT_MILLI, REMAINING, RETRY_MS, RESET_MS, BLOCKED_US = range(FIELDS)
#: Fields in front of the policies': admitted, now_us.
_HEAD = 2
#: The values of a policy's ``allowed`` field.
DENIED, ADMITTED, LOCKOUT_STARTED = 0, 1, 2

Reply = list[int]


def admitted(reply: Reply) -> bool:
    """Whether the call admitted the request (no enforcing policy denied it)."""
    return bool(reply[0])


def now_us(reply: Reply) -> int:
    """The Redis clock when the call ran (the first call's, when merged)."""
    return int(reply[1])


def fields(reply: Reply, index: int) -> Reply:
    """Policy ``index``'s fields, in the order of :data:`FIELDS`."""
    start = _HEAD + FIELDS * index
    return reply[start : start + FIELDS]


def field(reply: Reply, index: int, which: int) -> int:
    """One field (:data:`ALLOWED` ... :data:`BLOCKED_US`) of policy ``index``."""
    return int(reply[_HEAD + FIELDS * index + which])


def allows(reply: Reply, index: int) -> bool:
    """Whether policy ``index`` allowed the request (its ``allowed`` field is
    :data:`ADMITTED`; :data:`LOCKOUT_STARTED` is a denial)."""
    return int(reply[_HEAD + FIELDS * index + ALLOWED]) == ADMITTED


def call_time_us(reply: Reply, index: int, policies: int) -> int:
    """When policy ``index`` (of ``policies``) was decided: its own call's time in a merged
    reply, else the one call's."""
    timed = len(reply) > _HEAD + FIELDS * policies
    return int(reply[_HEAD + FIELDS * policies + index]) if timed else now_us(reply)


def merged(groups: Sequence[Sequence[int]], replies: Sequence[Reply], policies: int) -> Reply:
    """One reply for ``policies`` policies from the replies of the calls that decided
    ``groups`` of them (each group: the indexes of its policies, in its call's order)."""
    result: Reply = [int(all(admitted(r) for r in replies)), now_us(replies[0])]
    found: list[Reply] = [[] for _ in range(policies)]
    times = [0] * policies
    for group, reply in zip(groups, replies, strict=True):
        for position, index in enumerate(group):
            found[index] = list(fields(reply, position))
            times[index] = now_us(reply)
    for policy_fields in found:
        result.extend(policy_fields)
    result.extend(times)
    return result
