"""What one cluster node knows of the others (``CLUSTER MYID``, ``NODES``, ``INFO``)."""

from __future__ import annotations

from ratelimits.testing.server import RedisServer


def node_id(node: RedisServer) -> str:
    """The cluster node id of ``node`` (``CLUSTER MYID``)."""
    return str(node.client().cluster("myid").decode())


def knows(node: RedisServer, other_id: str) -> bool:
    """Whether ``node`` knows the node ``other_id``."""
    return other_id.encode() in node.client().execute_command("CLUSTER", "NODES")


def sees_every_slot(node: RedisServer) -> bool:
    """Whether ``node`` knows an owner for every slot and serves (``cluster_state:ok``)."""
    info = node.client().cluster("info")
    return int(info["cluster_slots_assigned"]) == 16384 and info["cluster_state"] == "ok"
