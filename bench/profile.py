"""The hot path, profiled: where ``PolicyThrottle`` spends its time on an allowed request.

A DRF view with ``PolicyThrottle`` and one matching ``sliding_log`` policy, called in
process through ``RequestFactory`` from rotating client addresses (every request allowed).
Two views of the same path:

- **the steps**, each timed alone over many calls: matching the policies, the client's
  identity, the key, the decide call (one FCALL round trip) and the whole
  ``allow_request``, beside a bare ``PING`` round trip on the same connection;
- **a pyinstrument profile** of ``allow_request``, the frames that take 2 % or more.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from bench.common import BENCH_DIR, Context, Section, markdown_table
from ratelimits.engine import limiter
from ratelimits.engine.store import connection
from ratelimits.engine.table import current as table
from ratelimits.http import request_facts
from ratelimits.http.headers import DECISIONS_ATTRIBUTE
from ratelimits.throttling import PolicyThrottle

SCOPE = "profiled"

#: What profiling led to, for the report (kept as Markdown beside this module).
CHANGES = (BENCH_DIR / "changes.md").read_text(encoding="utf-8").strip()


class _View:
    throttle_scope = SCOPE


def _requests(count: int) -> list:
    from django.test import RequestFactory
    from rest_framework.request import Request

    factory = RequestFactory()
    found = []
    for n in range(count):
        raw = factory.get(
            f"/policy/{SCOPE}/", REMOTE_ADDR=f"10.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}"
        )
        raw.resolver_match = None
        found.append(Request(raw))
    return found


def _per_call(function: Callable[[], object], calls: int, runs: int) -> float:
    """Median over ``runs`` of the mean microseconds per call."""
    results = []
    for _ in range(runs):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        results.append((time.perf_counter() - started) / calls * 1e6)
    results.sort()
    return results[len(results) // 2]


def run(ctx: Context) -> Section:
    from ratelimits.models import Policy

    Policy.objects.create(
        name="profiled", endpoint=SCOPE, algorithm="sliding_log", limit=1_000_000, window=3600
    )
    calls = ctx.scaled(3000, 200)
    requests = _requests(calls)
    view = _View()
    throttle = PolicyThrottle()
    throttle.allow_request(requests[0], view)  # the table and the script are loaded
    policy = table.get_table().match(method="GET", path="/x/", scope=SCOPE)[0]
    client = connection.get_client()
    cursor = iter(range(10**9))

    def next_request():
        request = requests[next(cursor) % calls]
        # A request is decided once per policy: forget the decisions of the last use.
        request._request.__dict__.pop(DECISIONS_ATTRIBUTE, None)
        return request

    steps = [
        (
            "match the policies (in-process table)",
            lambda: throttle.get_policies(next_request(), view),
        ),
        (
            "the client's identity",
            lambda: request_facts.request_identity("ip", next_request(), None),
        ),
        ("the key", lambda: policy.key_for("ip:10.0.0.1")),
        (
            "the decide call (limiter.decide, 1 FCALL)",
            lambda: limiter.decide([limiter.Check(policy, f"ip:10.9.{next(cursor) % 65536}")]),
        ),
        (
            "PolicyThrottle.allow_request, all of it",
            lambda: throttle.allow_request(next_request(), view),
        ),
        ("PING round trip (the floor)", client.ping),
    ]
    rows = [[name, f"{_per_call(step, calls, ctx.runs):.1f}"] for name, step in steps]

    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0001)
    profiler.start()
    for _ in requests:
        throttle.allow_request(next_request(), view)
    profiler.stop()
    text = profiler.output_text(unicode=False, color=False, show_all=True, time="percent_of_total")
    kept = [line for line in text.splitlines() if _share(line) >= 2.0]
    Policy.objects.all().delete()
    body = "\n\n".join(
        [
            __doc__.split("\n\n", 1)[1].strip(),
            markdown_table(["step", "µs per call (median)"], rows),
            "```\n" + "\n".join(kept) + "\n```",
            CHANGES,
        ]
    )
    return Section("Profile of the hot path", body)


def _share(line: str) -> float:
    """The percentage at the start of a pyinstrument line (0 when there is none)."""
    found = re.match(r"^[\s|`-]*([0-9.]+)%", line)
    return float(found[1]) if found else 0.0
