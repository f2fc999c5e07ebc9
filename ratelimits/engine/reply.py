"""The decide code's reply, read in one place. Its layout is the one ``lua/decide.lua``'s
header gives:

    {admitted, now_us, then for each policy i: allowed, count x 1000, remaining,
     retry_ms, reset_ms, blocked_us}

where ``allowed`` is :data:`DENIED`, :data:`ADMITTED` or :data:`LOCKOUT_STARTED` (denied,
and this call started the policy's lockout): read it with :func:`allows`.

A reply merged from several calls (a cluster's hash slots: :func:`merged`) carries, after
the policies' fields, each policy's own call time in microseconds (:func:`call_time_us`).
"""

from __future__ import annotations

from collections.abc import Sequence

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
