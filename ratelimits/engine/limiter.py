"""(policies, identities) -> decisions, in one Redis round trip: the engine's public calls.

:func:`decide` runs the decide code (see ``lua/decide.lua``) once for every policy that
matches a request, in one call (on a Redis Cluster, one per hash slot the request's keys
use): an ``FCALL`` of the function library, or the script by SHA where the server has no
Functions. The pieces behind it, each in a module of its own:

- :mod:`~ratelimits.engine.attempt`: the request's decision around its calls (the
  remembered denial that answers it without one, the verdict, the fail mode);
- :mod:`~ratelimits.engine.steps`: the calls to make, written once, driven sync or async;
- :mod:`~ratelimits.engine.store.route`: where a call goes, chosen once per client (one
  server or a cluster), with its circuit breakers;
- :mod:`~ratelimits.engine.decide_protocol`: the call's
  arguments and its reply, as ``lua/decide.lua`` lays them out;
- :mod:`~ratelimits.engine.give_back`: what a response gives back afterwards;
- :mod:`~ratelimits.engine.pipelined`: a look queued on a tool's pipeline.

When Redis cannot answer, or the circuit breaker is open, every policy answers with its
fail mode instead. Nothing here knows about DRF, the admin or HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence

from ratelimits.engine.attempt import Attempt
from ratelimits.engine.decision import Verdict, verdict_from
from ratelimits.engine.give_back import give_back
from ratelimits.engine.pipelined import queue_peek
from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.receipt import Receipt
from ratelimits.engine.steps import Steps, adrive, drive, plan
from ratelimits.engine.store.connection import Client
from ratelimits.engine.store.route import current, route_for

__all__ = [
    "Check",
    "Receipt",
    "adecide",
    "decide",
    "evaluate",
    "give_back",
    "peek",
    "queue_peek",
    "verdict_from",
]


def decide(checks: Sequence[Check], *, record: bool = True, now: float | None = None) -> Verdict:
    """Decide one request against ``checks``, all or nothing.

    ``record=False`` only looks: nothing is written. ``now`` (seconds since the epoch)
    replaces the Redis clock, for replaying exact timelines in tests; only requests on
    the Redis clock use and feed the worker's remembered denials. A recorded request is
    counted once (stats, the dashboard, Prometheus), with the time it took here; an
    admitted one names in ``verdict.near_limit`` the policies it took near their limits
    (:mod:`ratelimits.engine.reporting.near_limit`).
    """
    if not checks:
        return Verdict()
    return drive(_deciding(checks, record, now))


async def adecide(
    checks: Sequence[Check], *, record: bool = True, now: float | None = None
) -> Verdict:
    """:func:`decide` for coroutines: the same steps, sent on a ``redis.asyncio``
    connection of the running loop."""
    if not checks:
        return Verdict()
    return await adrive(_deciding(checks, record, now))


def _deciding(checks: Sequence[Check], record: bool, now: float | None) -> Steps[Verdict]:
    attempt = Attempt(checks, record, now)
    if attempt.answer is not None:
        return attempt.answer
    try:
        reply = yield from plan(current(), checks, record=record, now=now)
    except Exception as error:
        return attempt.failed(error)
    return attempt.decided(reply)


def peek(checks: Sequence[Check], client: Client) -> tuple[int, Verdict]:
    """What ``checks`` would decide now, consuming nothing: ``(now_us, verdict)``.

    For tools (the management command, the admin): no breaker and no fail mode, so a
    Redis error is raised to the caller.
    """
    if not checks:
        return int(client.time()[0]) * 1_000_000, Verdict()
    return evaluate(checks, client, record=False)


def evaluate(
    checks: Sequence[Check], client: Client, *, record: bool, now: float | None = None
) -> tuple[int, Verdict]:
    """Decide ``checks`` on ``client`` (one call per hash slot), without a breaker:
    ``(now_us, verdict)``; Redis errors are raised."""
    steps = plan(route_for(client), checks, record=record, now=now, guarded=False)
    return verdict_from(checks, drive(steps))
