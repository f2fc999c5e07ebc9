"""What an admitted request spent that its response may give back.

A request is always spent when it is admitted, in the same all-or-nothing call as its
other policies, so parallel requests can never slip past a limit. Two kinds of policy
then take units back once the response is known (:func:`ratelimits.engine.limiter.give_back`):

- a ``concurrency`` policy, always: its units are the request's slots in progress;
- a policy whose ``counts`` is ``failures`` (status 400 or more spends) or
  ``successes`` (below 400), after a response that does not count;
- a sign-in policy (``sign_in_failures``), after an ``authenticate()`` that did not fail.

The decide call makes a :class:`Receipt` only when one of its recorded policies is of
these kinds; every other request carries none and costs nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import ratelimits.engine.algorithms as algorithms
import ratelimits.engine.decide_protocol as protocol
from ratelimits.engine.policy.compiled import Check

#: The lowest status that is a failure, for ``counts``.
FAILURE_STATUS = 400
#: The ``counts`` that keep the units of a failure: a response's (``failures``), or a
#: sign-in's, whose outcome is given as :data:`FAILURE_STATUS` or below
#: (:mod:`ratelimits.http.sign_in`).
_COUNTING_FAILURES = ("failures", "sign_in_failures")


@dataclass(slots=True)
class Receipt:
    """The policies of one admitted request that may give units back (read-only).

    ``times[i]`` is when ``checks[i]`` was recorded, in microseconds on the Redis clock,
    as its decide call replied (on a cluster, each hash slot's call has its own);
    ``marks[i]`` is the count that call replied for it, which names what it stored (see
    ``lua/give_back.lua``).
    """

    checks: tuple[Check, ...]
    times: tuple[int, ...]
    marks: tuple[int, ...]

    def due(self, status: int | None) -> list[int]:
        """Indexes of the checks to give back after a response of ``status``; ``None``
        when no response came (the client went away first): then only slots are given
        back, and every counted unit stays spent."""
        due = []
        for index, check in enumerate(self.checks):
            policy = check.policy
            if algorithms.released(policy.algorithm):
                due.append(index)
            elif status is not None and policy.counts != "all":
                failed = status >= FAILURE_STATUS
                if failed != (policy.counts in _COUNTING_FAILURES):
                    due.append(index)
        return due


def receipt_of(checks: Sequence[Check], reply: protocol.Reply) -> Receipt | None:
    """The receipt of a recording decide call's ``reply``, or ``None`` when the request
    was not admitted or spent nothing to give back."""
    if not protocol.admitted(reply):
        return None
    held, times, marks = [], [], []
    for index, check in enumerate(checks):
        if check.policy.gives_back and protocol.allows(reply, index):
            held.append(check)
            times.append(protocol.call_time_us(reply, index, len(checks)))
            marks.append(protocol.field(reply, index, protocol.COUNT_MILLI) // 1000)
    if not held:
        return None
    return Receipt(tuple(held), tuple(times), tuple(marks))
