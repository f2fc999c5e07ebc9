"""A concurrency key's leases, read-only: one per request in progress, whatever its cost.

The key is a sorted set (``lua/concurrency.lua``): each member is named
``"<start_us>-<n>"``, or ``"<start_us>-<n>x<cost>"`` for a request of several units (when
the request was admitted, on the Redis clock, in microseconds), and scored by when its
lease ends, in microseconds; the member ``"#"`` (the units held, a running total) is not
a lease and is skipped. A lease whose end has
passed no longer counts (its slot freed itself); it stays stored until the key's next
admission prunes it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ratelimits.engine import algorithms
from ratelimits.engine.keys import names as keys
from ratelimits.engine.store.connection import Client
from ratelimits.tools.inventory import by_node
from ratelimits.tools.snapshots import read_together


@dataclass(frozen=True, slots=True)
class Lease:
    """One unit in progress: when it started and when its lease ends (microseconds)."""

    start_us: int
    end_us: int

    def age(self, now_us: int) -> float:
        """Seconds since the request was admitted."""
        return (now_us - self.start_us) / 1_000_000

    def ends_in(self, now_us: int) -> float:
        """Seconds until the lease ends and the slot frees itself (0 once ended)."""
        return max(0, self.end_us - now_us) / 1_000_000

    def ended(self, now_us: int) -> bool:
        """True once the lease no longer counts (as ``lua/concurrency.lua`` counts)."""
        return self.end_us <= now_us


@dataclass(frozen=True, slots=True)
class Held:
    """A key's leases, oldest first, and its server's clock when they were read."""

    now_us: int
    leases: tuple[Lease, ...]

    @property
    def live(self) -> tuple[Lease, ...]:
        """The leases that still count: the requests in progress."""
        return tuple(lease for lease in self.leases if not lease.ended(self.now_us))


def parse(members: Iterable[tuple[bytes | str, float]]) -> list[Lease]:
    """Leases from ``ZRANGE ... WITHSCORES``, oldest first; a member not of the form
    ``"<start_us>-<n>"`` is skipped."""
    found = []
    for member, score in members:
        text = member.decode(errors="replace") if isinstance(member, bytes) else member
        start, separator, _ = text.partition("-")
        if separator and start.isdigit():
            found.append(Lease(int(start), int(score)))
    found.sort(key=lambda lease: (lease.start_us, lease.end_us))
    return found


def read(client: Client, names: Sequence[keys.KeyName]) -> dict[str, Held]:
    """The leases of each concurrency key of ``names`` (the others are left out), by key:
    one moment per server (:func:`read_together`), with its ``TIME``; nothing is
    written."""
    found: dict[str, Held] = {}
    wanted = [name for name in names if algorithms.released(name.algorithm)]
    for node, group in by_node(client, wanted, key=lambda name: name.key).items():
        (seconds, micros), *replies = read_together(node, functools.partial(_queue, group))
        now_us = int(seconds) * 1_000_000 + int(micros)
        for name, members in zip(group, replies, strict=True):
            if not isinstance(members, Exception):  # a foreign value under the name
                found[name.key] = Held(now_us, tuple(parse(members)))
    return found


def _queue(group: Sequence[keys.KeyName], pipe: Any) -> None:
    pipe.time()
    for name in group:
        pipe.zrange(name.key, 0, -1, withscores=True)
