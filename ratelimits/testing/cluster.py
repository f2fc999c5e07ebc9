"""A local Redis Cluster, which a test can grow and shrink."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence

from redis.cluster import ClusterNode, RedisCluster

from ratelimits.testing.binaries import find_redis_cli
from ratelimits.testing.membership import knows, node_id, sees_every_slot
from ratelimits.testing.ports import free_cluster_port
from ratelimits.testing.processes import StartedServers
from ratelimits.testing.server import RedisServer
from ratelimits.testing.slots import SlotMigration


class RedisClusterServers(StartedServers):
    """A local Redis Cluster of ``primaries`` nodes (no replicas) on 127.0.0.1.

    Each node is a :class:`RedisServer` started with ``--cluster-enabled yes``; the slots
    are assigned with ``redis-cli --cluster create``. ``cluster-require-full-coverage no``
    lets the other nodes keep serving their slots while one is down, as production
    clusters without replicas should. Nodes keep their ``nodes.conf``, so a node
    restarted with :meth:`RedisServer.restart` rejoins with its slots (empty).
    """

    #: The options every node starts with.
    options = (
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        "2000",
        "--cluster-require-full-coverage",
        "no",
        "--cluster-config-file",
        "nodes.conf",
    )

    def __init__(self, primaries: int = 3) -> None:
        self.nodes = [
            RedisServer(free_cluster_port(), extra=self.options) for _ in range(primaries)
        ]

    @property
    def startup_nodes(self) -> list[str]:
        return [f"redis://127.0.0.1:{node.port}" for node in self.nodes]

    def client(self) -> RedisCluster:
        nodes = [ClusterNode("127.0.0.1", node.port) for node in self.nodes]
        return RedisCluster(startup_nodes=nodes, socket_timeout=5)

    def start(self, timeout: float = 30.0) -> RedisClusterServers:
        for node in self.nodes:
            node.start()
        command = [
            find_redis_cli(),
            "--cluster",
            "create",
            *(f"127.0.0.1:{node.port}" for node in self.nodes),
            "--cluster-replicas",
            "0",
            "--cluster-yes",
        ]
        created = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if created.returncode != 0:
            self.stop()
            raise RuntimeError(f"redis-cli --cluster create failed:\n{created.stdout}")
        self.wait_ok(timeout)
        return self

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Wait until every running node reports ``cluster_state:ok`` and all slots."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = []
            for node in self.nodes:
                if node.process is None:
                    continue
                info = node.client().cluster("info")
                states.append(
                    info["cluster_state"] == "ok" and int(info["cluster_slots_ok"]) == 16384
                )
            if states and all(states):
                return
            time.sleep(0.05)
        raise RuntimeError(f"the cluster did not become ok within {timeout} s")

    def stop(self) -> None:
        for node in self.nodes:
            node.__exit__(None, None, None)

    def running(self) -> list[RedisServer]:
        """The nodes whose process runs."""
        return [node for node in self.nodes if node.process is not None]

    def add_primary(self, timeout: float = 30.0) -> RedisServer:
        """Start one more node and join it, as ``redis-cli --cluster add-node`` does
        (``CLUSTER MEET``); return it once every node knows it and it knows every slot's
        owner. It owns no slot yet (give it some with :meth:`move_slots`) and is one of
        :attr:`nodes` from now on."""
        node = RedisServer(free_cluster_port(), extra=self.options).start()
        try:
            members = self.running()
            members[0].client().cluster("meet", "127.0.0.1", str(node.port))
            new_id = node_id(node)
            deadline = time.monotonic() + timeout
            while not all(knows(m, new_id) for m in members) or not sees_every_slot(node):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the new node did not join within {timeout} s")
                time.sleep(0.05)
        except BaseException:
            node.__exit__(None, None, None)
            raise
        self.nodes.append(node)
        return node

    def remove_primary(self, node: RedisServer) -> None:
        """Take ``node``, a primary that owns no slot, out of the cluster as ``redis-cli
        --cluster del-node`` does: every other node forgets it (``CLUSTER FORGET``), then
        it stops and leaves :attr:`nodes`."""
        gone = node_id(node)
        self.nodes.remove(node)
        for other in self.running():
            if knows(other, gone):
                other.client().cluster("forget", gone)
        node.__exit__(None, None, None)

    def owners(self) -> dict[int, RedisServer]:
        """Each slot's primary, as the first running node sees it (``CLUSTER SLOTS``)."""
        by_port = {node.port: node for node in self.nodes}
        owners: dict[int, RedisServer] = {}
        for start, end, primary, *_ in self.running()[0].client().cluster("slots"):
            for slot in range(int(start), int(end) + 1):
                owners[slot] = by_port[int(primary[1])]
        return owners

    def move_slots(self, slots: Sequence[int], target: RedisServer) -> None:
        """Move ``slots`` and their keys to ``target``: the three steps of
        :class:`SlotMigration` in a row."""
        migration = SlotMigration(self, slots, target)
        migration.start()
        migration.migrate_keys()
        migration.finish()
