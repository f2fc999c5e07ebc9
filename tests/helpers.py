"""Small helpers shared by the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.db import connection as db_connection

from ratelimits.engine import limiter
from ratelimits.engine.decision import Decision, Verdict
from ratelimits.engine.policy import CompiledPolicy
from ratelimits.engine.store import connection
from ratelimits.models import Policy

ROOT = Path(__file__).resolve().parent.parent

IDENTITY = "ip:203.0.113.7"


def policy(
    algorithm: str, limit: int, window: int, name: str = "p", **fields: object
) -> CompiledPolicy:
    return CompiledPolicy.build(
        name=name, endpoint="x", algorithm=algorithm, limit=limit, window=window, **fields
    )


def hit(p: CompiledPolicy, now: float, identity: str = IDENTITY) -> Decision:
    """One request at ``now`` (seconds) against one policy."""
    return limiter.decide([limiter.Check(p, identity)], now=now).decisions[0]


def hit_all(policies: list[CompiledPolicy], now: float, identity: str = IDENTITY) -> Verdict:
    return limiter.decide([limiter.Check(p, identity) for p in policies], now=now)


def make_policy(name: str = "login", **fields: object) -> Policy:
    """A saved policy on ``api:<name>``: sliding_log, 5 per 60 s per address, unless
    ``fields`` say otherwise."""
    values = {
        "endpoint": f"api:{name}",
        "algorithm": "sliding_log",
        "limit": 5,
        "window": 60,
        "key": "ip",
        **fields,
    }
    return Policy.objects.create(name=name, **values)


def evalsha_calls(redis_client: Any) -> int:
    """Script calls that ran (a NOSCRIPT reply, before redis-py loads the script on a
    node that has not seen it, is a failed call and not counted)."""
    total = 0
    for node in connection.node_clients(redis_client):
        row = node.info("commandstats").get("cmdstat_evalsha", {})
        total += int(row.get("calls", 0)) - int(row.get("failed_calls", 0))
    return total


def start_worker(*args: str) -> subprocess.Popen[str]:
    """Another web worker of the same site, as a process: ``python -m tests.worker ARGS``
    on the test database (see ``tests/worker.py``)."""
    env = {**os.environ, "DEMO_DB": db_connection.settings_dict["NAME"]}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.worker", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
