"""The decide call for a request's checks: its keys and arguments, as the decide code
reads them (``lua/decide.lua``'s header) and :mod:`ratelimits.engine.store.commands`
sends them.

On the request path the arguments are bytes each policy packed ahead
(``Check.wire_args``), behind a head shared by every request; a replayed time (tests,
the tools' timelines) packs them again, since a calendar period depends on the time.
"""

from __future__ import annotations

from collections.abc import Sequence

from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.store import commands
from ratelimits.engine.store.commands import bulk_strings

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
