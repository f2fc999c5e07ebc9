"""One throw-away ``redis-server``."""

from __future__ import annotations

from collections.abc import Sequence

from ratelimits.testing.binaries import find_redis_server
from ratelimits.testing.ports import free_port
from ratelimits.testing.processes import ServerProcess
from ratelimits.tools.servers import server_name


class RedisServer(ServerProcess):
    """A ``redis-server`` process on 127.0.0.1, without persistence.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. :meth:`restart`
    brings it back empty on the same port; :meth:`kill` stops it without cleanup, as a
    crash would; :meth:`server_name` says which server and version it is.
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

    def server_name(self) -> str:
        """What the running server is, truthfully: ``"valkey-server 9.1.2"``,
        ``"redis-server 7.0.15"`` (Valkey reports a Redis version besides its own)."""
        return server_name(self.client().info("server"))

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
