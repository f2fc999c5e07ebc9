"""How a policy change reaches every worker process.

A change to the ``Policy`` table (save, delete, queryset ``update()``, bulk create) is
announced once per transaction, after it commits: a version stamp in Redis is bumped so
other workers reload within ``POLICY_REFRESH_INTERVAL``, the process rebuilds its own
table in the background at once, serving the one it holds meanwhile
(:func:`ratelimits.engine.table.current.mark_changed`), and
:data:`ratelimits.signals.policy_changed` is sent. The model receivers that call
:func:`schedule_policy_change` are in :mod:`ratelimits.database.receivers`; bulk writes
call it from the models' queryset.
"""

from __future__ import annotations

import threading

from django.db import DEFAULT_DB_ALIAS, transaction

from ratelimits.engine.table.current import mark_changed
from ratelimits.signals import policy_changed


def schedule_policy_change(using: str | None = None) -> None:
    """Announce a policy change once the current transaction (if any) commits: once per
    transaction, however many rows it writes (a bulk delete, an import, a queryset
    ``update()``, the overrides a delete cascades to).

    Every change schedules the same pending :class:`_Announcement` of this thread and
    database; the first of its callbacks to run, after the commit, announces and retires
    it, and the others do nothing. A change whose callback a rollback (of the transaction,
    of a savepoint) threw away leaves the announcement pending for the next change, and
    a test that runs the callbacks of a block (``captureOnCommitCallbacks``) sees each
    block's changes announced."""
    alias = using or DEFAULT_DB_ALIAS
    pending = _pending()
    announcement = pending.get(alias)
    if announcement is None:
        announcement = pending[alias] = _Announcement(alias)
    transaction.on_commit(announcement.run, using=using)


class _Announcement:
    """The announcement of the changes that one transaction commits."""

    __slots__ = ("alias", "done")

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.done = False

    def run(self) -> None:
        pending = _pending()
        if pending.get(self.alias) is self:
            del pending[self.alias]  # the next change schedules a new one
        if not self.done:
            self.done = True
            _announce_policy_change()


_local = threading.local()


def _pending() -> dict[str, _Announcement]:
    """This thread's pending announcement, per database alias."""
    pending: dict[str, _Announcement] | None = getattr(_local, "pending", None)
    if pending is None:
        pending = _local.pending = {}
    return pending


def _announce_policy_change() -> None:
    mark_changed()
    policy_changed.send(sender=_announce_policy_change)
