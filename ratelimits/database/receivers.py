"""The model signal receivers that announce policy changes; :func:`connect` is called by
``AppConfig.ready()``.

Saving or deleting a ``Policy`` or a ``PolicyOverride``, a bulk write of them (the
models' queryset sends ``rows_written``), and a user joining or leaving a group that an
override names, is announced like any policy change
(:func:`ratelimits.database.announcements.schedule_policy_change`).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import m2m_changed, post_delete, post_save

from ratelimits.database.announcements import schedule_policy_change
from ratelimits.models import Policy, PolicyOverride
from ratelimits.querysets import rows_written


def connect() -> None:
    """Connect the receivers (idempotent: each has a ``dispatch_uid``)."""
    for model in (Policy, PolicyOverride):
        post_save.connect(
            on_policy_saved_or_deleted, sender=model, dispatch_uid=f"ratelimits.saved.{model}"
        )
        post_delete.connect(
            on_policy_saved_or_deleted, sender=model, dispatch_uid=f"ratelimits.deleted.{model}"
        )
        rows_written.connect(
            on_policy_saved_or_deleted, sender=model, dispatch_uid=f"ratelimits.written.{model}"
        )
    groups = getattr(get_user_model(), "groups", None)
    if groups is not None:  # a custom user model may have no groups
        m2m_changed.connect(
            on_group_membership_changed,
            sender=groups.through,
            dispatch_uid="ratelimits.group_membership",
        )


def on_policy_saved_or_deleted(sender: Any, using: str | None = None, **kwargs: Any) -> None:
    """``post_save``, ``post_delete`` and bulk writes' ``rows_written`` receiver for
    ``Policy`` and ``PolicyOverride``."""
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
    overridden = PolicyOverride.objects.using(using).filter(group__isnull=False)
    if reverse:  # group.user_set.add(...): the instance is the group
        overridden = overridden.filter(group_id=instance.pk)
    elif pk_set:  # user.groups.add(...): pk_set holds the groups
        overridden = overridden.filter(group_id__in=pk_set)
    if overridden.exists():
        schedule_policy_change(using)
