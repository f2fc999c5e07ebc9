"""The policy models' querysets: bulk writes announce a change as saves do."""

from __future__ import annotations

from typing import Any

from django.db import models

from ratelimits.signals import schedule_policy_change


class AnnouncingQuerySet(models.QuerySet[Any]):
    """Bulk writes skip ``post_save``; these still tell every worker the table changed."""

    def update(self, **kwargs: Any) -> int:
        rows = super().update(**kwargs)
        if rows:
            schedule_policy_change(self.db)
        return rows

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[Any]:
        created = super().bulk_create(objs, *args, **kwargs)
        if created:
            schedule_policy_change(self.db)
        return created

    def bulk_update(self, objs: Any, *args: Any, **kwargs: Any) -> int:
        rows = super().bulk_update(objs, *args, **kwargs)
        if rows:
            schedule_policy_change(self.db)
        return rows
