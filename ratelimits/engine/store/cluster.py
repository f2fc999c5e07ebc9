"""The limiter's Redis Cluster client: built from ``RATELIMITS["CLUSTER_NODES"]`` and
``RATELIMITS["CLUSTER_OPTIONS"]`` (:func:`create_client`), a redis-py ``RedisCluster``
that also reaches a primary owning no slot yet (:class:`ClusterClient`), and the helpers
that follow a slot's move (:func:`asked_client`, :func:`learn_moved`) or read the
cluster's layout again (:func:`refresh_topology`)."""

from __future__ import annotations

import threading
import time
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import PRIMARY, ClusterNode, RedisCluster, get_node_name
from redis.retry import Retry

from ratelimits.conf import app_settings
from ratelimits.engine.store.async_connections import accepted
from ratelimits.exceptions import ConfigurationError


class ClusterClient(RedisCluster):
    """redis-py's cluster client that also reaches a primary that owns no slot yet, as a
    new one filling during a reshard, when an ``ASK`` names it.

    redis-py looks the node an ``ASK`` names up among the nodes of its slot map, read
    from ``CLUSTER SLOTS``, where a primary without slots is not, and fails with an
    ``AttributeError`` (redis-py #4015): on any command, such as reading the policy
    table's version stamp. Here a node that is not there is made on first use and kept
    beside the map, never in it: the slot map and the primaries the tools scan stay
    ``CLUSTER SLOTS``'."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Set first: a client whose startup nodes all fail is closed by redis-py's
        # __del__ after its __init__ raised.
        self._unmapped: dict[str, ClusterNode] = {}
        self._unmapped_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def get_node(
        self, host: str | None = None, port: int | None = None, node_name: str | None = None
    ) -> ClusterNode | None:
        node = super().get_node(host, port, node_name)
        if node is None and (node_name or (host and port)):
            name = node_name or get_node_name(host, port)
            with self._unmapped_lock:
                node = self._unmapped.get(name)
                if node is None:
                    at, _, number = name.rpartition(":")
                    node = self._unmapped[name] = ClusterNode(at, int(number), PRIMARY)
        return node

    def close(self) -> None:
        super().close()
        with self._unmapped_lock:
            unmapped = list(self._unmapped.values())
            self._unmapped.clear()
        for node in unmapped:
            if node.redis_connection is not None:
                node.redis_connection.close()


#: Seconds a tool client's view of a cluster's layout is trusted.
TOPOLOGY_TTL = 1.0
_topology_read: dict[int, float] = {}


def refresh_topology(client: RedisCluster) -> None:
    """Read the cluster's layout (``CLUSTER SLOTS``) again when ``client`` last did more
    than :data:`TOPOLOGY_TTL` seconds ago."""
    now = time.monotonic()
    if now - _topology_read.get(id(client), 0.0) >= TOPOLOGY_TTL:
        client.nodes_manager.initialize()
        _topology_read[id(client)] = now


def asked_client(client: RedisCluster, host: str, port: int) -> redis.Redis:
    """A client of the node an ``ASK`` names, with the cluster's connection settings, a
    primary that owns no slot yet too (:class:`ClusterClient`)."""
    return client.get_redis_connection(client.get_node(host=host, port=port))


def learn_moved(client: RedisCluster, moved: redis.exceptions.MovedError) -> None:
    """Teach the cluster client's slot map the owner a ``MOVED`` named (a slot resharded
    since the map was read): redis-py 7 and newer name it ``move_slot``; older ones keep
    it in ``update_moved_exception`` until the next slot lookup, which is made at once
    (``get_node_from_key`` reads the map without one)."""
    nodes = client.nodes_manager
    move_slot = getattr(nodes, "move_slot", None)
    if move_slot is not None:
        move_slot(moved)
    else:
        nodes.update_moved_exception(moved)
        nodes.get_node_from_slot(moved.slot_id)


def parse_node(url: str) -> tuple[str, int]:
    """``(host, port)`` of a cluster startup node: ``redis://host:port`` or ``host:port``.
    Raises ``ValueError`` with a readable message."""
    parts = _split_node(url)
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ValueError(f"{url!r} is not a Redis node: write redis://host:port or host:port.")
    try:
        port = parts.port or 6379
    except ValueError:
        raise ValueError(f"{url!r} has a bad port.") from None
    return parts.hostname, port


def _split_node(url: str) -> SplitResult:
    """``url`` taken apart; a bare ``host:port`` is read as ``redis://host:port``."""
    return urlsplit(url if "://" in url else f"redis://{url}")


def create_client(nodes: list[str], timeout: float) -> RedisCluster:
    """A cluster client of the startup ``nodes`` (credentials and TLS from the first one's
    URL and :func:`cluster_options`), with ``timeout`` and no retries."""
    try:
        startup = [ClusterNode(*parse_node(url)) for url in nodes]
    except ValueError as e:
        raise ConfigurationError(f"RATELIMITS['CLUSTER_NODES']: {e}") from e
    first = _split_node(nodes[0])
    options: dict[str, Any] = {
        "username": unquote(first.username) if first.username else None,
        "password": unquote(first.password) if first.password else None,
        "ssl": first.scheme == "rediss",
        **cluster_options(),
    }
    return ClusterClient(
        startup_nodes=startup,
        **options,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        require_full_coverage=False,
    )


#: What ``RATELIMITS["CLUSTER_OPTIONS"]`` may set: the nodes' credentials and TLS.
CLUSTER_OPTION_NAMES = frozenset(
    {"username", "password", "ssl", "client_name", "credential_provider"}
    | {name for name in accepted(redis.connection.SSLConnection) if name.startswith("ssl_")}
)


def cluster_options() -> dict[str, Any]:
    """``RATELIMITS["CLUSTER_OPTIONS"]``, checked: a name redis-py's connections do not
    take (or one the limiter sets itself, a timeout) raises ``ConfigurationError``."""
    options = app_settings.CLUSTER_OPTIONS
    if not isinstance(options, dict):
        raise ConfigurationError("RATELIMITS['CLUSTER_OPTIONS'] must be a dict.")
    unknown = sorted(set(options) - CLUSTER_OPTION_NAMES)
    if unknown:
        raise ConfigurationError(
            f"RATELIMITS['CLUSTER_OPTIONS'] names {', '.join(unknown)}, which it does not "
            f"take; it takes {', '.join(sorted(CLUSTER_OPTION_NAMES))}."
        )
    return dict(options)
