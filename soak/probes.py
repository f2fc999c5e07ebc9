"""What the run reads from Redis itself: its memory while the load runs and after the
site stopped, and the concurrency leases once the load has stopped.

A server's *data bytes* are ``INFO memory``'s ``used_memory`` less what is not data:
the clients' and replicas' buffers, the replication backlog, the AOF buffer, the cluster
bus links and the cached scripts and functions (reloaded after each flush). Each
primary of a sample is measured against its own baseline, or a primary's (see
:class:`Baseline`).
A connection costs Redis memory beyond its buffers (tens of KB while busy), and a server
keeps a few hundred KB more once its first clients came and went and it loaded its code
again after a flush, so the baseline is taken after the site has served a few seconds of
the load (with a flush) and stopped, its keys deleted, and ``used_memory`` is compared
with the per-client figures only at the end, once the site stopped again. Every sample also
measures each policy's keys with ``MEMORY USAGE``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

import redis

from ratelimits.engine.keys.names import parse_key
from ratelimits.testutils import RedisServer
from soak.history import LeaseLook, MemorySample
from soak.topology import Topology

#: Seconds between two memory samples, and the probes' socket timeout.
INTERVAL = 2.0
TIMEOUT = 1.0
SETTLE = 2.0
PREFIX = "rl"
PRIMARY = "master"
LEASES = f"{PREFIX}:{{*}}:soak-report:leases"
#: INFO memory fields that are not data.
NOT_DATA = (
    "mem_clients_normal",
    "mem_clients_slaves",
    "mem_replication_backlog",
    "mem_aof_buffer",
    "mem_cluster_links",
    "used_memory_scripts",
)


_clients: dict[int, redis.Redis] = {}


def client(node: RedisServer) -> redis.Redis:
    """One client per server for all the probes (a new connection costs Redis memory)."""
    if node.port not in _clients:
        _clients[node.port] = redis.Redis(host="127.0.0.1", port=node.port, socket_timeout=TIMEOUT)
    return _clients[node.port]


def data_bytes(node: RedisServer) -> int:
    info = client(node).info("memory")
    return int(info["used_memory"]) - sum(int(info.get(name, 0)) for name in NOT_DATA)


def role(node: RedisServer) -> str:
    return str(client(node).info("replication")["role"])


@dataclass(frozen=True)
class Baseline:
    """Each server's data bytes at rest, and the median of those of each role. A primary
    is measured against its own baseline when it was a primary then, else against the
    primaries' median (a replica promoted since, a primary added)."""

    by_port: dict[int, tuple[str, int]]
    by_role: dict[str, int]

    def of(self, node: RedisServer) -> int:
        role, size = self.by_port.get(node.port, ("", 0))
        return size if role == PRIMARY else self.by_role[PRIMARY]

    @property
    def primary(self) -> int:
        return self.by_role[PRIMARY]


def baselines(nodes: Iterable[RedisServer]) -> Baseline:
    """The data bytes of ``nodes``, :data:`SETTLE` seconds from now."""
    time.sleep(SETTLE)
    by_port = {node.port: (role(node), data_bytes(node)) for node in nodes}
    found: dict[str, list[int]] = {}
    for name, size in by_port.values():
        found.setdefault(name, []).append(size)
    medians = {name: int(statistics.median(sizes)) for name, sizes in found.items()}
    return Baseline(by_port, medians)


def scan(node: RedisServer, pattern: str = "*") -> list[bytes]:
    return list(client(node).scan_iter(match=pattern, count=1000))


def key_bytes(node: RedisServer) -> tuple[dict[str, list[int]], int]:
    """``[keys, bytes]`` of each policy's keys on ``node``, and the bytes of its other keys."""
    keys = scan(node)
    pipe = client(node).pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key, samples=0)
    by_policy: dict[str, list[int]] = {}
    other = 0
    for key, size in zip(keys, pipe.execute(raise_on_error=False), strict=True):
        size = size if isinstance(size, int) else 0  # gone since the scan
        name = parse_key(key, PREFIX)
        if name is None:
            other += size
        else:
            found = by_policy.setdefault(name.policy, [0, 0])
            found[0] += 1
            found[1] += size
    return by_policy, other


def sample(topology: Topology, baseline: Baseline) -> MemorySample:
    """What the primaries hold now; ``at`` is when the reading ended (a key seen may be of
    a client that came during it)."""
    above = bookkeeping = connections = 0
    by_policy: dict[str, list[int]] = {}
    for node in topology.primaries():
        above += data_bytes(node) - baseline.of(node)
        connections += int(client(node).info("clients")["connected_clients"])
        found, other = key_bytes(node)
        bookkeeping += other
        for policy, (keys, size) in found.items():
            total = by_policy.setdefault(policy, [0, 0])
            total[0] += keys
            total[1] += size
    return MemorySample(time.time(), above, by_policy, bookkeeping, connections)


def final_sample(topology: Topology, baseline: Baseline) -> MemorySample:
    """A sample once the site has stopped, after :data:`SETTLE` seconds (Redis updates
    what its clients' buffers take only every so often), with each primary's data bytes."""
    time.sleep(SETTLE)
    taken = sample(topology, baseline)
    nodes = {str(node.port): data_bytes(node) for node in topology.primaries()}
    return dataclasses.replace(taken, final=True, nodes=nodes)


class MemoryWatch(threading.Thread):
    """Samples every :data:`INTERVAL` seconds until :meth:`stop`; a sample that a
    stopped or paused server cannot answer is left out."""

    def __init__(self, topology: Topology, baseline: Baseline) -> None:
        super().__init__(name="soak-memory", daemon=True)
        self.topology, self.baseline = topology, baseline
        self.samples: list[MemorySample] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(INTERVAL):
            self.take()

    def take(self) -> None:
        with contextlib.suppress(redis.RedisError, OSError, IndexError):
            self.samples.append(sample(self.topology, self.baseline))

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=INTERVAL + 30 * TIMEOUT)
        self.take()


def leases(topology: Topology) -> LeaseLook:
    """The concurrency policy's live leases (their start times) and its stored keys."""
    from ratelimits.tools.leases import parse  # the tools need Django set up first

    live: list[float] = []
    stored = 0
    for node in topology.primaries():
        conn = client(node)
        seconds, micros = conn.time()
        now_us = int(seconds) * 1_000_000 + int(micros)
        for key in scan(node, LEASES):
            stored += 1
            for lease in parse(conn.zrange(key, 0, -1, withscores=True)):
                if not lease.ended(now_us):
                    live.append(lease.start_us / 1e6)
    return LeaseLook(time.time(), tuple(sorted(live)), stored)


def watch_leases(topology: Topology, seconds: float) -> list[LeaseLook]:
    """Looks at the leases every half second until no key is left, ``seconds`` at most."""
    looks = [leases(topology)]
    deadline = time.monotonic() + seconds
    while looks[-1].keys and time.monotonic() < deadline:
        time.sleep(0.5)
        looks.append(leases(topology))
    return looks
