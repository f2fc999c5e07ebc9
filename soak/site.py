"""The site under soak: the demo with the soak's views (:mod:`soak.settings`), served by
gunicorn (2 sync workers) and uvicorn (2 workers, the async path), each on a free port of
127.0.0.1, their output in the run's directory."""

from __future__ import annotations

import http.client
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ratelimits.testutils import free_port, stop_process

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 2
START_TIMEOUT = 60.0


def manage(env: Mapping[str, str], *args: str, timeout: float = 120.0) -> str:
    """``manage.py *args`` on the soak's settings; its output. Raises when it fails."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def commands(ports: Mapping[str, int]) -> dict[str, list[str]]:
    """The server commands, by server name."""
    return {
        "gunicorn": [
            sys.executable,
            "-m",
            "gunicorn",
            "project.wsgi:application",
            "--workers",
            str(WORKERS),
            "--worker-class",
            "sync",
            "--bind",
            f"127.0.0.1:{ports['gunicorn']}",
        ],
        "uvicorn": [
            sys.executable,
            "-m",
            "uvicorn",
            "project.asgi:application",
            "--workers",
            str(WORKERS),
            "--host",
            "127.0.0.1",
            "--port",
            str(ports["uvicorn"]),
            "--no-access-log",
            "--log-level",
            "warning",
        ],
    }


class Site:
    """Both servers: :meth:`start` waits until each answers ``/soak/ping/``."""

    def __init__(self, env: Mapping[str, str], directory: Path) -> None:
        self.env = dict(env)
        self.directory = directory
        self.ports = {"gunicorn": free_port(), "uvicorn": free_port()}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def log(self, name: str) -> Path:
        return self.directory / f"{name}.log"

    def start(self) -> None:
        for name, command in commands(self.ports).items():
            with self.log(name).open("wb") as out:
                self.processes[name] = subprocess.Popen(
                    command, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
                )
        for name in self.processes:
            self._wait(name)

    def _wait(self, name: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.processes[name].poll() is not None:
                raise RuntimeError(f"{name} exited at start:\n{self.tail(name)}")
            if status(self.ports[name], "/soak/ping/") == 200:
                return
            time.sleep(0.2)
        raise RuntimeError(f"{name} did not answer in {START_TIMEOUT} s:\n{self.tail(name)}")

    def tail(self, name: str) -> str:
        return self.log(name).read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        for process in self.processes.values():
            stop_process(process)

    def workers(self, name: str) -> list[int]:
        """The worker processes of server ``name`` (the children of its master)."""
        pid = self.processes[name].pid
        try:
            text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        except OSError:
            return []
        return [int(child) for child in text.split()]


def status(port: int, path: str, headers: Mapping[str, str] | None = None) -> int:
    """The status of one GET (0 when there is no answer)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers=dict(headers or {}))
        response = conn.getresponse()
        response.read()
        return response.status
    except OSError:
        return 0
    finally:
        conn.close()
