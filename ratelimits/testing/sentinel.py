"""A Redis Sentinel watching a :class:`~ratelimits.testing.server.RedisServer`."""

from __future__ import annotations

from ratelimits.testing.ports import free_port
from ratelimits.testing.processes import ServerProcess
from ratelimits.testing.server import RedisServer


class RedisSentinel(ServerProcess):
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
