"""Signals, and how a policy change reaches every worker process.

A change to the ``Policy`` table (save, delete, queryset ``update()``, bulk create) is
announced after the transaction commits: the process's own table is dropped at once,
a version stamp in Redis is bumped so other workers reload within
``POLICY_REFRESH_INTERVAL`` (:func:`ratelimits.engine.table.mark_changed`), and
:data:`policy_changed` is sent. The model receivers that call
:func:`schedule_policy_change` are in :mod:`ratelimits.receivers`.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

from ratelimits.engine.decision import Verdict
from ratelimits.engine.table import mark_changed

logger = logging.getLogger("ratelimits")

#: Sent after a committed change to the policy table (no arguments besides ``sender``).
policy_changed = Signal()

#: Sent once for every request a face denies (a 429; a shadow policy never denies), by
#: ``sender`` the face: ``PolicyThrottle`` (DRF's or django-ninja's), ``RateLimitMiddleware``
#: or ``ratelimits.decorators.ratelimit``. Keyword arguments: ``request`` (the request the
#: face saw), ``decisions`` (the denying :class:`~ratelimits.engine.decision.Decision`
#: objects), ``policy`` and ``identity`` (the first denying decision's). Receivers run on
#: the request path, so keep them quick; one that raises is logged and the request still
#: gets its 429. Async receivers are awaited on the async path.
request_throttled = Signal()


def schedule_policy_change(using: str | None = None) -> None:
    """Announce a policy change once the current transaction (if any) commits."""
    transaction.on_commit(_announce_policy_change, using=using)


def _announce_policy_change() -> None:
    mark_changed()
    policy_changed.send(sender=_announce_policy_change)


def send_request_throttled(sender: object, request: Any, verdict: Verdict) -> None:
    """Send :data:`request_throttled` for a request ``verdict`` denies. A receiver's
    exception is logged, not raised: the request is still a 429."""
    _log_failures(request_throttled.send_robust(sender, request=request, **_about(verdict)))


async def asend_request_throttled(sender: object, request: Any, verdict: Verdict) -> None:
    """:func:`send_request_throttled` from a coroutine: async receivers are awaited, sync
    ones run in a thread, as Django's ``Signal.asend_robust`` does."""
    sent = await request_throttled.asend_robust(sender, request=request, **_about(verdict))
    _log_failures(sent)


def _about(verdict: Verdict) -> dict[str, Any]:
    decisions = [decision for decision in verdict.decisions if decision.blocks]
    first = decisions[0]
    return {"decisions": decisions, "policy": first.policy, "identity": first.identity}


def _log_failures(results: list[tuple[Any, Any]]) -> None:
    for receiver, result in results:
        if isinstance(result, Exception):
            logger.error(
                "ratelimits: request_throttled receiver %r failed: %r",
                receiver,
                result,
                exc_info=result,
            )
