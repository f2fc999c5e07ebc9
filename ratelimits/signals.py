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

#: Sent once for every request ``PolicyThrottle`` denies (a 429; a shadow policy never
#: denies), by ``sender=PolicyThrottle``, with keyword arguments ``request`` (the DRF
#: request), ``decisions`` (the denying :class:`~ratelimits.decision.Decision` objects),
#: ``policy`` and ``identity`` (the first denying decision's). Receivers run on the request
#: path, so keep them quick; one that raises is logged and the request still gets its 429.
request_throttled = Signal()


def schedule_policy_change(using: str | None = None) -> None:
    """Announce a policy change once the current transaction (if any) commits."""
    transaction.on_commit(_announce_policy_change, using=using)


def _announce_policy_change() -> None:
    from ratelimits import policy_table

    policy_table.mark_changed()
    policy_changed.send(sender=_announce_policy_change)


def on_policy_saved_or_deleted(sender: Any, using: str | None = None, **kwargs: Any) -> None:
    """``post_save`` / ``post_delete`` receiver for ``Policy`` and ``PolicyOverride``."""
    schedule_policy_change(using)


def on_group_membership_changed(
    sender: Any,
    instance: Any,
    action: str,
    reverse: bool,
    pk_set: set[Any] | None,
    using: str | None = None,
    **kwargs: Any,
) -> None:
    """``m2m_changed`` receiver for the user model's groups: a user joining or leaving a
    group that an override names changes their limit, so it is announced like a policy
    edit. Changes to other groups cost one query and announce nothing."""
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    from ratelimits.models import PolicyOverride

    overridden = PolicyOverride.objects.using(using).filter(group__isnull=False)
    if reverse:  # group.user_set.add(...): the instance is the group
        overridden = overridden.filter(group_id=instance.pk)
    elif pk_set:  # user.groups.add(...): pk_set holds the groups
        overridden = overridden.filter(group_id__in=pk_set)
    if overridden.exists():
        schedule_policy_change(using)
