"""The three Redis topologies a soak runs on, each started on free ports of 127.0.0.1 with
:mod:`ratelimits.testutils`: one server; a primary, its replica and three sentinels; a
three-primary cluster. Each says how the site reaches it (:meth:`Topology.env`) and
which servers hold the counts now (:meth:`Topology.primaries`)."""

from __future__ import annotations

import time

import redis

from ratelimits.testutils import RedisClusterServers, RedisSentinel, RedisServer

#: Sentinel's service name, and how long a primary must be silent before the sentinels
#: fail it over: longer than the pause fault (2 s), so that a pause stays a pause.
SERVICE = "soak"
DOWN_AFTER_MS = 3000
#: Seconds to wait for a topology to settle.
READY_TIMEOUT = 30.0


class Topology:
    """One topology's servers: started, described, stopped."""

    name = ""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        """The environment that points :mod:`soak.settings` at these servers."""
        raise NotImplementedError

    def primaries(self) -> list[RedisServer]:
        """The servers that hold the counts now."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


class Single(Topology):
    name = "single"

    def __init__(self) -> None:
        self.server = RedisServer()

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.__exit__(None, None, None)

    def env(self) -> dict[str, str]:
        return {"REDIS_URL": self.server.url}

    def primaries(self) -> list[RedisServer]:
        return [self.server] if self.server.process is not None else []

    def describe(self) -> str:
        return "one redis-server"


class Sentinel(Topology):
    """A primary and its replica, watched by three sentinels (a failover needs two)."""

    name = "sentinel"

    def __init__(self) -> None:
        self.first = RedisServer()
        self.second = RedisServer(extra=("--replicaof", "127.0.0.1", str(self.first.port)))
        self.sentinels = [
            RedisSentinel(self.first, SERVICE, down_after_ms=DOWN_AFTER_MS) for _ in range(3)
        ]

    @property
    def servers(self) -> list[RedisServer]:
        return [self.first, self.second]

    def start(self) -> None:
        self.first.start()
        self.second.start()
        for sentinel in self.sentinels:
            sentinel.start()
        self.wait_ready()

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Until every sentinel knows the other two and a replica whose link is up."""
        deadline = time.monotonic() + timeout
        while not self._ready():
            if time.monotonic() > deadline:
                raise RuntimeError("the sentinels never agreed on a healthy primary and replica")
            time.sleep(0.2)

    def _ready(self) -> bool:
        try:
            for sentinel in self.sentinels:
                client = sentinel.client()
                master = client.sentinel_master(SERVICE)
                if int(master.get("num-other-sentinels", 0)) < len(self.sentinels) - 1:
                    return False
                replicas = client.sentinel_slaves(SERVICE)
                if not any(r.get("master-link-status") == "ok" for r in replicas):
                    return False
        except redis.RedisError:
            return False
        return True

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        for server in self.servers:
            server.__exit__(None, None, None)

    def env(self) -> dict[str, str]:
        return {
            "REDIS_URL": self.first.url,
            "SOAK_SENTINELS": ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels),
            "SOAK_SENTINEL_SERVICE": SERVICE,
        }

    def named_port(self) -> int | None:
        """The primary's port as the first sentinel that answers names it."""
        for sentinel in self.sentinels:
            try:
                _, port = sentinel.client().sentinel_get_master_addr_by_name(SERVICE)
                return int(port)
            except (redis.RedisError, TypeError):
                continue
        return None

    def primary(self) -> RedisServer:
        port = self.named_port()
        return next((s for s in self.servers if s.port == port), self.first)

    def replica(self) -> RedisServer:
        primary = self.primary()
        return next(s for s in self.servers if s is not primary)

    def primaries(self) -> list[RedisServer]:
        primary = self.primary()
        return [primary] if primary.process is not None else []

    def describe(self) -> str:
        return "a primary, a replica and 3 sentinels"


class Cluster(Topology):
    """The test utilities' local cluster: three primaries, no replicas."""

    name = "cluster"

    def __init__(self) -> None:
        self.cluster = RedisClusterServers(primaries=3)

    def start(self) -> None:
        self.cluster.start()

    def stop(self) -> None:
        self.cluster.stop()

    def env(self) -> dict[str, str]:
        return {
            "REDIS_URL": self.cluster.nodes[0].url,
            "SOAK_CLUSTER_NODES": ",".join(self.cluster.startup_nodes),
        }

    def primaries(self) -> list[RedisServer]:
        return self.cluster.running()

    def describe(self) -> str:
        return "a Redis Cluster of 3 primaries"


TOPOLOGIES: dict[str, type[Topology]] = {kind.name: kind for kind in (Single, Sentinel, Cluster)}
