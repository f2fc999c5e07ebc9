"""Requests from test clients, and other web workers of the same site as processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.db import connection as db_connection

from project.database import url_of

ROOT = Path(__file__).resolve().parents[2]


def statuses(client: Any, url: str, n: int, method: str = "get", **extra: Any) -> list[int]:
    """The statuses of ``n`` requests of ``client`` (a test client) to ``url`` with
    ``method``; ``extra`` goes with each (headers, ``REMOTE_ADDR``)."""
    send = getattr(client, method)
    return [send(url, **extra).status_code for _ in range(n)]


def item_statuses(client: Any, ip: str, n: int) -> list[int]:
    """The statuses of ``n`` GETs of /api/items/ from ``ip``."""
    return statuses(client, "/api/items/", n, REMOTE_ADDR=ip)


def start_worker(*args: str) -> subprocess.Popen[str]:
    """Another web worker of the same site, as a process: ``python -m tests.worker ARGS``
    on the test database (see ``tests/worker.py``)."""
    env = {**os.environ, "DATABASE_URL": url_of(db_connection.settings_dict)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.worker", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def worker_line(worker: subprocess.Popen[str], changed: float | None = None) -> list[str]:
    """The next line of a ``tests/worker.py`` process (waiting for it), split.

    With ``changed`` (``time.monotonic()`` right after a change in this process), asserts
    that the first of the worker's version-stamp checks after the change brought what the
    line shows (its last two fields: the check's time and the one before, see
    ``tests/worker.py``). Checks are ``POLICY_REFRESH_INTERVAL`` apart
    (``tests/engine/table/test_reload.py``), so that is the bound, whatever the time the
    machine takes to run the worker."""
    line = worker.stdout.readline()
    assert line, "the worker ended without another line"
    fields = line.split()
    if changed is not None:
        assert float(fields[-1]) < changed, ("a check after the change missed it", line, changed)
    return fields
