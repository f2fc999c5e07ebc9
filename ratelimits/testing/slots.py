"""Slots of a local cluster moving to another primary, step by step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import redis

from ratelimits.testing.membership import node_id
from ratelimits.testing.server import RedisServer

if TYPE_CHECKING:
    from ratelimits.testing.cluster import RedisClusterServers


class SlotMigration:
    """``slots`` moving to ``target`` while clients use them, each slot by the steps
    ``redis-cli --cluster reshard`` takes, which a test may run apart (say, each while a
    load runs):

    1. :meth:`start`: the target imports each slot (``CLUSTER SETSLOT <slot> IMPORTING``),
       then its owner migrates it (``MIGRATING``). The owner still answers for the keys
       it holds, and sends a client asking for a key it lacks on with ``ASK``.
    2. :meth:`migrate_keys`: each slot's keys go over with ``MIGRATE``, ``batch`` keys at
       a time, each batch atomically on the owner.
    3. :meth:`finish`: every node learns the new owner (``SETSLOT <slot> NODE``): the
       target first, then the old owner, then the others; the old owner now answers
       ``MOVED``.

    redis-cli sends these slot by slot; here each step sends pipelines of up to
    :attr:`SLOTS_AT_ONCE` slots (each slot still takes the steps in that order), so that
    thousands of slots move in a second or so. Not many more: a node pauses for the slots
    whose new owner it learns at once, and requests wait (each old node about 100 ms for
    2048 slots, 10 ms for 128, on a 2-core machine).
    """

    SLOTS_AT_ONCE = 128

    def __init__(
        self,
        cluster: RedisClusterServers,
        slots: Sequence[int],
        target: RedisServer,
        batch: int = 10,
    ) -> None:
        self.cluster, self.target, self.batch = cluster, target, batch
        owners = cluster.owners()
        #: The slots to move, by their owner now.
        self.sources: dict[RedisServer, list[int]] = {}
        for slot in slots:
            if owners[slot] is not target:
                self.sources.setdefault(owners[slot], []).append(slot)
        self._clients = {node.port: node.client() for node in cluster.running()}
        self._ids = {node.port: node_id(node) for node in cluster.running()}

    @property
    def slots(self) -> list[int]:
        """The slots this migration moves."""
        return sorted(slot for slots in self.sources.values() for slot in slots)

    def start(self) -> None:
        """Step 1: the target importing, then each owner migrating, every slot."""
        for source, slots in self.sources.items():
            self._setslots(self.target, slots, "IMPORTING", source)
            self._setslots(source, slots, "MIGRATING", self.target)

    def migrate_keys(self) -> None:
        """Step 2: every key of the slots sent to the target, ``batch`` keys a ``MIGRATE``."""
        for source, slots in self.sources.items():
            client = self._clients[source.port]
            listing = client.pipeline(transaction=False)
            for slot in slots:
                listing.cluster("getkeysinslot", slot, self.batch)
            for slot, keys in zip(slots, listing.execute(), strict=True):
                while keys:
                    client.execute_command(
                        "MIGRATE", "127.0.0.1", self.target.port, "", 0, 5000, "KEYS", *keys
                    )
                    keys = client.cluster("getkeysinslot", slot, self.batch)

    def finish(self) -> None:
        """Step 3: every node told the new owner (the target, the old owners, the others),
        :attr:`SLOTS_AT_ONCE` slots at a time."""
        others = [n for n in self.cluster.running() if n is not self.target]
        others.sort(key=lambda node: node not in self.sources)  # old owners first
        slots = self.slots
        for at in range(0, len(slots), self.SLOTS_AT_ONCE):
            for node in (self.target, *others):
                self._setslots(node, slots[at : at + self.SLOTS_AT_ONCE], "NODE", self.target)

    def _setslots(
        self, node: RedisServer, slots: list[int], state: str, other: RedisServer
    ) -> None:
        """``CLUSTER SETSLOT <slot> <state> <other's id>`` on ``node`` for every slot,
        :attr:`SLOTS_AT_ONCE` a pipeline.

        An old owner that gave away its last slot may have become the new owner's replica
        already (``cluster-allow-replica-migration``), which refuses the command: it knows
        the owner already."""
        for at in range(0, len(slots), self.SLOTS_AT_ONCE):
            pipe = self._clients[node.port].pipeline(transaction=False)
            for slot in slots[at : at + self.SLOTS_AT_ONCE]:
                pipe.cluster("setslot", slot, state, self._ids[other.port])
            for reply in pipe.execute(raise_on_error=False):
                if isinstance(reply, redis.ResponseError) and "only with masters" not in str(reply):
                    raise reply
