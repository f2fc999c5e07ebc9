"""A separate worker process for the tests: ``python -m tests.worker MODE ...``.

It sets up the demo project against the database in ``DATABASE_URL`` and the Redis in
``REDIS_URL``, as another web worker of the same site would.

- ``watch NAME SECONDS [USERNAME]``: print ``<limit> <checks>`` each time this process's
  policy table shows a new limit for policy NAME (``-`` while it has none, ``exempt``
  when an override exempts USERNAME), for SECONDS at most; with USERNAME, the limit
  after that user's overrides.
- ``flood PATH SECONDS``: send GETs to PATH from one client, about one per millisecond;
  print ``denied`` at the first 429, then ``admitted <checks>`` at the first 200 after
  it and stop (or stop after SECONDS).
- ``hammer PATH THREADS REQUESTS START``: at the epoch time START, THREADS threads each
  send REQUESTS GETs to PATH through the full Django stack; print the status counts as JSON.

``<checks>`` tells which of this process's policy-table checks (reads of the version
stamp, every ``POLICY_REFRESH_INTERVAL``) brought the change: ``<at> <before>``, when the
check that started the build of the table in use ran, and when the check before it ran
(``time.monotonic()``: the same clock in every process of the machine). A test that
made a change at ``t`` asserts ``before < t``: the first check after the change brought
it, however long the machine took to run the checks and the build.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter


def _setup() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    import django

    django.setup()


class Checks:
    """The times of this process's policy-table checks, noted after each of its calls
    that may run one (this process's only thread that does)."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    def note(self) -> None:
        from ratelimits.engine.table.cache import cache

        at = cache.checked_at
        if not self.seen or at != self.seen[-1]:
            self.seen.append(at)

    def of_table(self) -> str:
        """``<at> <before>`` of the check that started the build of the table in use."""
        from ratelimits.engine.table.cache import cache

        at = cache.loaded_at
        return f"{at} {max((c for c in self.seen if c < at), default=0.0)}"


def watch(name: str, seconds: float, username: str | None = None) -> None:
    from ratelimits.engine.table import current as table
    from ratelimits.tools.identities import find_user

    user_key = str(find_user(username).pk) if username else None
    deadline = time.monotonic() + seconds
    shown = None
    checks = Checks()
    while time.monotonic() < deadline:
        policy = table.get_table().get(name)
        checks.note()
        if policy is not None and user_key is not None:
            policy = policy.for_client(user_key, "ip:127.0.0.1")
            limit = str(policy.limit) if policy else "exempt"
        else:
            limit = str(policy.limit) if policy else "-"
        if limit != shown:
            print(limit, checks.of_table(), flush=True)
            shown = limit
        time.sleep(0.01)


def flood(path: str, seconds: float) -> None:
    from django.test import Client

    from ratelimits.engine.table import current as table
    from ratelimits.engine.table.cache import cache

    client = Client()
    deadline = time.monotonic() + seconds
    denied = None
    checks = Checks()
    while time.monotonic() < deadline:
        status = client.get(path, REMOTE_ADDR="203.0.113.9").status_code
        checks.note()
        if status == 429 and denied is None:
            denied = cache.version
            print("denied", flush=True)
        elif status == 200 and denied is not None:
            # The stamp's check let the client in (it forgets the denials at once); the
            # table it started is built in the background: report once it is in use.
            while cache.version == denied and time.monotonic() < deadline:
                table.get_table()
                checks.note()
                time.sleep(0.001)
            print("admitted", checks.of_table(), flush=True)
            return
        time.sleep(0.001)


def hammer(path: str, threads: int, requests: int, start: float) -> None:
    from django.test import Client

    counts: Counter[int] = Counter()
    lock = threading.Lock()

    def run() -> None:
        client = Client()
        time.sleep(max(0.0, start - time.time()))
        for _ in range(requests):
            status = client.get(path, REMOTE_ADDR="203.0.113.7").status_code
            with lock:
                counts[status] += 1

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    print(json.dumps({str(k): v for k, v in counts.items()}), flush=True)


if __name__ == "__main__":
    _setup()
    mode, *args = sys.argv[1:]
    if mode == "watch":
        watch(args[0], float(args[1]), *args[2:])
    elif mode == "flood":
        flood(args[0], float(args[1]))
    elif mode == "hammer":
        hammer(args[0], int(args[1]), int(args[2]), float(args[3]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
