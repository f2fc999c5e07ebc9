"""The demo site served by a real server process, and a load that releases many HTTP
clients together: what the gunicorn and uvicorn tests share.

:func:`serve` starts a server command (``gunicorn project.wsgi:application ...``,
``uvicorn project.asgi:application ...``) on the tests' database and Redis, waits until
it answers and stops it afterwards. :func:`fire` sends a fixed number of GETs from
threads released together, each on its own connection, and returns every reply.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from django.db import connection

from project.database import url_of
from ratelimits.conf import app_settings
from ratelimits.engine.keys import names as keys
from ratelimits.testutils import stop_process

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 20.0
LOAD_TIMEOUT = 60.0


@dataclass(frozen=True)
class Site:
    """A running server: its port, process and log file."""

    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-5000:]


@dataclass(frozen=True)
class Reply:
    status: int
    policy_header: str | None
    body: bytes


def get(port: int, path: str, timeout: float = 5.0) -> Reply:
    """One GET on a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return Reply(response.status, response.getheader("RateLimit-Policy"), response.read())
    finally:
        conn.close()


def site_env(**extra: str) -> dict[str, str]:
    """The environment of a server of the demo on the tests' database (set up: call from
    a fixture that depends on ``django_db_setup``) and Redis."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.site_settings",
        "DATABASE_URL": url_of(connection.settings_dict),  # the test database, once set up
        "REDIS_URL": os.environ["REDIS_URL"],
        "DJANGO_DEBUG": "0",
        "RATELIMITS_NUM_PROXIES": "0",
        **extra,
    }


def gunicorn_command(port: int, workers: int, *options: str) -> list[str]:
    """``gunicorn project.wsgi:application`` with ``workers`` on ``127.0.0.1:port``, then
    ``options`` (``--worker-class``, ``--threads``)."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "project.wsgi:application",
        "--workers",
        str(workers),
        *options,
        "--bind",
        f"127.0.0.1:{port}",
    ]


def uvicorn_command(port: int, workers: int) -> list[str]:
    """``uvicorn project.asgi:application`` with ``workers`` on ``127.0.0.1:port``, quiet."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "project.asgi:application",
        "--workers",
        str(workers),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-access-log",
        "--log-level",
        "warning",
    ]


@contextmanager
def serve(
    command: Sequence[str], port: int, log: Path, env: Mapping[str, str], name: str
) -> Iterator[Site]:
    """Run ``command`` (a server of the demo on ``port``, called ``name`` in failures)
    from the project root, its output in ``log``, until the block ends; yields once
    ``GET /`` answers 200."""
    with open(log, "wb") as out:
        process = subprocess.Popen(list(command), cwd=ROOT, env=dict(env), stdout=out, stderr=out)
    site = Site(port, process, log)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"{name} exited with {process.returncode}:\n{site.output()}")
            try:
                if get(port, "/", timeout=1.0).status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{name} did not answer in {START_TIMEOUT} s:\n{site.output()}")
            time.sleep(0.1)
        yield site
    finally:
        stop_process(process)


def fire(port: int, path: str, clients: int, requests: int) -> list[Reply]:
    """``requests`` GETs of ``path`` from ``clients`` threads, each with its own connection
    (kept alive where the server allows), released together."""
    barrier = threading.Barrier(clients)
    replies: list[Reply] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=LOAD_TIMEOUT)
        try:
            barrier.wait(timeout=LOAD_TIMEOUT)
            for _ in range(requests // clients):
                conn.request("GET", path)  # reconnects where the server closed the last one
                response = conn.getresponse()
                reply = Reply(
                    response.status, response.getheader("RateLimit-Policy"), response.read()
                )
                with lock:
                    replies.append(reply)
        except BaseException as e:
            with lock:
                errors.append(e)
        finally:
            conn.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    deadline = time.monotonic() + LOAD_TIMEOUT
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    if any(thread.is_alive() for thread in threads):
        pytest.fail(f"the load did not finish in {LOAD_TIMEOUT} s ({len(replies)} replies)")
    assert not errors, f"client errors: {errors[:3]!r}"
    assert len(replies) == requests
    return replies


def statuses(replies: list[Reply]) -> dict[int, int]:
    """Status counts; fails, showing the bodies, on any status but 200 and 429."""
    counts = Counter(r.status for r in replies)
    odd = [r for r in replies if r.status not in (200, 429)]
    assert not odd, f"unexpected statuses {dict(counts)}: " + "\n".join(
        f"{r.status}: {r.body[:500]!r}" for r in odd[:5]
    )
    return dict(counts)


def announce_new_version(client: redis.Redis) -> None:
    """Set the policy table's version stamp to a value no worker has seen.

    Redis is flushed between tests, so the stamp restarts at 1 with each test's first
    policy: a worker that last checked during the previous test would see "1" again and
    keep its old table. A nanosecond timestamp (an integer, so INCR still works) is new
    to every worker; each reloads on its first request after POLICY_REFRESH_INTERVAL.
    """
    client.set(keys.version_key(app_settings.KEY_PREFIX), time.time_ns())


def wait_for_policy(site: Site, path: str, expected_header: str) -> None:
    """Wait (10 s at most) until a GET of ``path`` carries ``expected_header`` as its
    ``RateLimit-Policy``: the workers read the test database and hold the policy. Each
    try spends one request of the budget."""
    deadline = time.monotonic() + 10.0
    while get(site.port, path).policy_header != expected_header:
        assert time.monotonic() < deadline, f"the workers never saw {expected_header}:\n" + (
            site.output()
        )
        time.sleep(0.2)
