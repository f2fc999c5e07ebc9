"""Internal, not part of the public API (see docs/api.md).

The policy models' querysets: bulk writes are heard as saves are.

:data:`rows_written` is sent after a bulk write that changed rows; the database side
(:mod:`ratelimits.database.receivers`) announces it as it does a save or a delete.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.dispatch import Signal

#: Sent after a queryset's bulk write changed rows: ``sender`` the model, ``using`` the
#: database alias.
rows_written = Signal()


class AnnouncingQuerySet(models.QuerySet[Any]):
    """Bulk writes skip ``post_save``; these send :data:`rows_written` instead."""

    def update(self, **kwargs: Any) -> int:
        rows = super().update(**kwargs)
        if rows:
            rows_written.send(sender=self.model, using=self.db)
        return rows

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[Any]:
        created = super().bulk_create(objs, *args, **kwargs)
        if created:
            rows_written.send(sender=self.model, using=self.db)
        return created

    def bulk_update(self, objs: Any, *args: Any, **kwargs: Any) -> int:
        rows = super().bulk_update(objs, *args, **kwargs)
        if rows:
            rows_written.send(sender=self.model, using=self.db)
        return rows
