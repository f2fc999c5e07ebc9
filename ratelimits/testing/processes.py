"""A server process started, waited for and stopped, with a directory of its own."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import redis


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


class StartedServers:
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


class ServerProcess(StartedServers):
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
