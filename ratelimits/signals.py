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
#: ``sender`` the face's class (``PolicyThrottle``), with keyword arguments ``request``
#: (the request the face saw), ``decisions`` (the denying
#: :class:`~ratelimits.engine.decision.Decision` objects), ``policy`` and ``identity``
#: (the first denying decision's). Receivers run on the request path, so keep them quick;
#: one that raises is logged and the request still gets its 429.
request_throttled = Signal()


def schedule_policy_change(using: str | None = None) -> None:
    """Announce a policy change once the current transaction (if any) commits."""
    transaction.on_commit(_announce_policy_change, using=using)


def _announce_policy_change() -> None:
    mark_changed()
    policy_changed.send(sender=_announce_policy_change)


def send_request_throttled(sender: type, request: Any, verdict: Verdict) -> None:
    """Send :data:`request_throttled` for a request ``verdict`` denies. A receiver's
    exception is logged, not raised: the request is still a 429."""
    decisions = [decision for decision in verdict.decisions if decision.blocks]
    first = decisions[0]
    results = request_throttled.send_robust(
        sender,
        request=request,
        decisions=decisions,
        policy=first.policy,
        identity=first.identity,
    )
    for receiver, result in results:
        if isinstance(result, Exception):
            logger.error(
                "ratelimits: request_throttled receiver %r failed: %r",
                receiver,
                result,
                exc_info=result,
            )
