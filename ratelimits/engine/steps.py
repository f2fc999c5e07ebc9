"""The steps of deciding a request, written once for sync and async callers.

:func:`plan` is a generator that does no I/O: it yields each call to send (a
:class:`Send`), is sent the reply (or has the error thrown in), and returns the reply of
the whole decision. :func:`drive` and :func:`adrive` are its two thin drivers, which only
send: the one on the thread's connection, the other on the running loop's
(``redis.asyncio``). The same pattern as :func:`ratelimits.engine.store.commands.recover`.

A request's checks are one call on one server. On a cluster they are one call per hash
slot: one slot (every policy counts the same identity, the usual case) is still one call;
several are first checked in every slot without recording, and recorded slot by slot
only when all admit. Each call re-checks atomically, so a request that races into a slot
between the two phases can be denied after it was recorded in another slot: it then
counts there. That errs towards denying, never towards admitting more than a limit.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import ratelimits.engine.decide_protocol as protocol
from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.store import breaker as breakers
from ratelimits.engine.store import connection
from ratelimits.engine.store.commands import DecideCall
from ratelimits.engine.store.route import Arguments, ServerRoute

T = TypeVar("T")


@dataclass(slots=True)
class Send:
    """One call to send: ``call`` for ``keys`` (one hash slot) along ``route``;
    ``arguments()`` gives them as strings, for a moving slot's follow-up."""

    route: ServerRoute
    keys: list[str]
    call: DecideCall
    arguments: Arguments


#: Steps that yield calls to send and return a ``T``.
Steps = Generator[Send, Any, T]


class ServerFailed(Exception):
    """A call failed on the server behind ``guard`` (for ``key``): the Redis error."""

    def __init__(self, guard: breakers.CircuitBreaker, key: str, error: Exception) -> None:
        super().__init__(str(error))
        self.guard, self.key, self.error = guard, key, error


def plan(
    route: ServerRoute,
    checks: Sequence[Check],
    *,
    record: bool,
    now: float | None,
    guarded: bool = True,
) -> Steps[protocol.Reply]:
    """The calls that decide ``checks`` along ``route``, and their reply, merged in the
    checks' order when there were several. ``guarded``: each call goes through its
    server's circuit breaker (raising ``BreakerOpen`` or :class:`ServerFailed`); the
    tools' calls do not, and their Redis errors are raised as they are."""
    if len(checks) == 1 or not route.is_cluster:
        return (yield from _one_call(route, checks, record, now, guarded))
    groups = route.groups([check.key for check in checks])
    if len(groups) == 1:
        return (yield from _one_call(route, checks, record, now, guarded))
    parts = [[checks[i] for i in group] for group in groups]
    looked = []
    for part in parts:
        looked.append((yield from _one_call(route, part, False, now, guarded)))
    if not (record and all(protocol.admitted(r) for r in looked)):
        return protocol.merged(groups, looked, len(checks))
    recorded = []
    for part in parts:
        recorded.append((yield from _one_call(route, part, True, now, guarded)))
    return protocol.merged(groups, recorded, len(checks))


def _one_call(
    route: ServerRoute, checks: Sequence[Check], record: bool, now: float | None, guarded: bool
) -> Steps[protocol.Reply]:
    """One call for ``checks`` (one hash slot), through its server's breaker when
    ``guarded``."""
    keys = [check.key for check in checks]
    call = protocol.decide_call(checks, record=record, now=now, keys=keys)
    send = Send(route, keys, call, lambda: protocol.arguments(checks, record, now))
    if not guarded:
        return (yield send)
    guard = route.guard(keys[0], writes=record)
    try:
        answer = yield send
    except connection.REDIS_ERRORS as e:
        raise ServerFailed(guard, keys[0], e) from e
    if record:
        guard.success()
    else:  # a look: Redis answered a call that wrote nothing
        guard.read_success()
    return answer  # type: ignore[no-any-return]


def drive(steps: Steps[T]) -> T:
    """Run ``steps``, sending each call on this thread's connection."""
    try:
        sent = next(steps)
        while True:
            try:
                answer = sent.route.send(sent.keys, sent.call, sent.arguments)
            except Exception as error:
                sent = steps.throw(error)
            else:
                sent = steps.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def adrive(steps: Steps[T]) -> T:
    """:func:`drive` from a coroutine: each call on a connection of the running loop."""
    try:
        sent = next(steps)
        while True:
            try:
                answer = await sent.route.asend(sent.keys, sent.call, sent.arguments)
            except Exception as error:
                sent = steps.throw(error)
            else:
                sent = steps.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
