"""Signals, and how a policy change reaches every worker process.

A change to the ``Policy`` table (save, delete, queryset ``update()``, bulk create) is
announced after the transaction commits: the process's own table is dropped at once,
a version stamp in Redis is bumped so other workers reload within
``POLICY_REFRESH_INTERVAL``, and :data:`policy_changed` is sent.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

logger = logging.getLogger("ratelimits")

#: Sent after a committed change to the policy table (no arguments besides ``sender``).
policy_changed = Signal()


def schedule_policy_change(using: str | None = None) -> None:
    """Announce a policy change once the current transaction (if any) commits."""
    transaction.on_commit(_announce_policy_change, using=using)


def _announce_policy_change() -> None:
    from ratelimits import policy_table

    policy_table.mark_changed()
    policy_changed.send(sender=_announce_policy_change)


def on_policy_saved_or_deleted(sender: Any, using: str | None = None, **kwargs: Any) -> None:
    """``post_save`` / ``post_delete`` receiver for ``Policy``."""
    schedule_policy_change(using)
