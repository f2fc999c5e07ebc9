"""The one place this process holds its policy table: :data:`cache`, with when it was
checked and built and the build under way, safe across threads and forks."""

from __future__ import annotations

import os
import threading

from ratelimits.conf import app_settings
from ratelimits.engine.table.policy_table import PolicyTable


class TableCache:
    """This process's table, when it was checked and built, and the build under way.

    ``lock`` guards every field. A request reads ``table`` without it, once: a new table
    replaces the reference whole, so a request has either the old table or the new one.
    Builds are numbered as they start; a table is swapped in only over one whose build
    started earlier (and so read the source earlier), and a drop refuses every build
    under way."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.table: PolicyTable | None = None
        #: The version stamp the table was built for.
        self.version: bytes | None = None
        self.checked_at = 0.0
        #: When the check that started the table's build ran.
        self.loaded_at = 0.0
        self.builds_started = 0
        #: The number of the build that made ``table``; after a drop, the last number
        #: handed out (every build up to it is refused).
        self.built = 0
        #: The background build under way (its number), and when it started.
        self.building: int | None = None
        self.building_since = 0.0
        #: A build asked for while one was under way, which may have read the source
        #: before the change: its version stamp and check time. The thread of the build
        #: under way starts it when done.
        self.rebuild: tuple[bytes | None, float] | None = None

    def fresh_table(self, now: float) -> PolicyTable | None:
        """The table when it needs no check now, else ``None``. The table is read once:
        another thread may drop it (``reset``, ``mark_changed``) at any moment."""
        table = self.table
        interval = float(app_settings.POLICY_REFRESH_INTERVAL)
        return table if table is not None and now - self.checked_at < interval else None

    def start_build(self) -> int:
        """Number a build about to read the source."""
        self.builds_started += 1
        return self.builds_started

    def swap_in(self, build: int, table: PolicyTable, version: bytes | None, at: float) -> bool:
        """Hold ``table`` from now on, unless a later build's table, or a drop, came first."""
        if build <= self.built:
            return False
        self.table, self.version, self.loaded_at, self.built = table, version, at, build
        return True

    def drop(self) -> None:
        """Hold no table: the next request builds one; builds under way are refused."""
        self.table = None
        self.built = self.builds_started
        self.rebuild = None

    def build_under_way(self, now: float) -> bool:
        """A background build is running (one running past ``POLICY_MAX_AGE`` is given up
        on, so that a hung database cannot freeze the table for good)."""
        max_age = float(app_settings.POLICY_MAX_AGE)
        return self.building is not None and now - self.building_since < max_age


#: This process's table.
cache = TableCache()


def _after_fork_in_child() -> None:
    # A thread of the parent may have held the lock, and its build does not run here.
    cache.lock = threading.Lock()
    cache.building = None
    cache.rebuild = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
