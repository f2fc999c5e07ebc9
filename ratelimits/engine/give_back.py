"""Giving back, after the response, what an admitted request holds that its response
does not keep (see :mod:`ratelimits.engine.receipt`)."""

from __future__ import annotations

import logging

import ratelimits.engine.decide_protocol as protocol
from ratelimits.engine.receipt import Receipt
from ratelimits.engine.store import breaker as breakers
from ratelimits.engine.store import commands, connection, errors
from ratelimits.engine.store.route import BreakerOpen, ServerRoute, current

logger = logging.getLogger("ratelimits")


class _Counted(Exception):
    """A give-back failed on a server whose breaker is open now (or on a busy pool):
    logged by the breaker already, not once more per give-back."""


def give_back(receipt: Receipt, status: int | None) -> None:
    """Give back what ``receipt``'s request holds that its response does not keep:
    concurrency slots always, and the units of a policy that does not count a response
    of ``status`` (``None``: no response came; see :meth:`Receipt.due`).

    One call (on a cluster, one per hash slot). Never raises: a Redis that cannot answer
    is logged (an open circuit breaker skips the call quietly), and the units stay spent
    until they leave their window (a concurrency slot until its lease ends).
    """
    due = receipt.due(status)
    if not due:
        return
    try:
        route = current()
        keys = [receipt.checks[i].key for i in due]
        for group in route.groups(keys) if len(due) > 1 else [[0]]:
            _give_back_group(receipt, [due[i] for i in group], route)
    except (BreakerOpen, connection.Unreachable):  # known down: the breaker said so
        logger.debug("ratelimits: the breaker is open; nothing given back")
    except _Counted as counted:  # the breaker is open: it logged its opening once
        logger.debug("ratelimits: nothing given back: %s", counted)
    except Exception as error:  # the response is sent: nothing may reach the client
        logger.warning(
            "ratelimits: could not give back %s: %s; the units stay spent until they "
            "leave their window (a concurrency slot until its lease ends).",
            ", ".join(check.policy.name for check in receipt.checks),
            error,
            exc_info=not isinstance(error, connection.REDIS_ERRORS),
        )


def _give_back_group(receipt: Receipt, group: list[int], route: ServerRoute) -> None:
    """One give-back call for the receipt's checks at ``group`` (one hash slot)."""
    checks = [receipt.checks[i] for i in group]
    times = [receipt.times[i] for i in group]
    args = protocol.give_back_arguments(checks, times, [receipt.marks[i] for i in group])
    keys = [check.key for check in checks]
    call = commands.decide_call(keys, commands.bulk_strings(args), len(args))
    guard = route.guard(keys[0])
    try:
        route.send(keys, call, lambda: args)
    except connection.REDIS_ERRORS as error:
        if errors.is_pool_busy(error):
            breakers.pool_busy(error)
            raise _Counted(error) from error
        if errors.is_outage(error):
            guard.failure(error)
            if guard.is_open:  # one line when it opened, none per give-back after
                raise _Counted(error) from error
        raise
    guard.success()
