"""Matching a request to its policies as the policy table grows, and the requests served
while the table is reloaded.

Half of the policies are path globs (`/api/v<i>/items/*`), half are names (a
`throttle_scope` or URL name). A request names one scope and has a path that one glob
matches; the figure is the time of :meth:`PolicyTable.match` (what
`PolicyThrottle.get_policies` does once the table is loaded). "Every glob tried" is the
same table matched the way it was before globs were indexed by their literal prefix: each
glob's pattern tried in turn.

Around a change: 5,000 such policies in the database; one request every 0.5 ms
(`get_table().match(...)`, as `PolicyThrottle` does) while the version stamp is moved in
Redis, as another worker's edit moves it, and until the new table has been served for a
while (`POLICY_REFRESH_INTERVAL` 0.25 s here, so a run takes about a second). Each
request's time, from its start to its policies, is recorded. "Built in the background" is
how a worker reloads now; "built by the request that checks" is how it did before (the
same code with every build in the request's thread), where that one request waits for the
whole reload.
"""

from __future__ import annotations

import fnmatch
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.test import override_settings

from bench.common import (
    Context,
    Section,
    Target,
    markdown_table,
    median,
    percentile,
    time_per_call,
)
from ratelimits.conf import app_settings
from ratelimits.database import policy_source
from ratelimits.engine.keys.names import version_key
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.table import current as policy_table
from ratelimits.engine.table.current import PolicyTable

SIZES = (10, 1000, 5000)
#: Matching at 5,000 policies may cost at most this many times what it costs at 10.
TARGET = 2.0


#: Policies in the database around a change.
AROUND_SIZE = 5000
#: Seconds between the requests served around a change, and the refresh interval then.
REQUEST_GAP = 0.0005
AROUND_INTERVAL = 0.25
#: The slowest request around a change may cost at most this share of a reload.
AROUND_TARGET = 0.1


def endpoint_of(i: int) -> str:
    return f"/api/v{i}/items/*" if i % 2 else f"scope-{i}"


def table_of(size: int) -> PolicyTable:
    policies = []
    for i in range(size):
        policies.append(
            CompiledPolicy.build(
                name=f"p{i:05d}",
                endpoint=endpoint_of(i),
                algorithm="fixed_window",
                limit=10,
                window=60,
            )
        )
    return PolicyTable(policies)


def every_glob_tried(table: PolicyTable) -> Callable[[str, str, str], list[CompiledPolicy]]:
    globs = [
        (re.compile(fnmatch.translate(p.endpoint)), p) for p in table.policies if p.is_path_pattern
    ]
    names: dict[str, list[CompiledPolicy]] = {}
    for p in table.policies:
        if not p.is_path_pattern:
            names.setdefault(p.endpoint, []).append(p)

    def match(method: str, path: str, scope: str) -> list[CompiledPolicy]:
        found = list(names.get(scope, ()))
        found.extend(policy for pattern, policy in globs if pattern.match(path))
        return [p for p in found if not p.methods or method in p.methods]

    return match


@dataclass(frozen=True)
class AroundAChange:
    """One run: each request's seconds, and when the new table was first served."""

    latencies: list[float]
    in_force_after: float


def serve_around_a_change(ctx: Context, size: int) -> AroundAChange:
    """Serve requests while the version stamp moves; stop once the new table was served
    for 0.2 s (or after 10 s, which is a failure)."""
    path, scope = f"/api/v{size - 1}/items/42", "scope-0"
    first = policy_table.get_table()  # the first load: no table to serve meanwhile
    latencies: list[float] = []
    start = time.perf_counter()
    moved_at = swapped_at = None
    with ctx.client() as client:
        while swapped_at is None or time.perf_counter() - swapped_at < 0.2:
            if moved_at is None and time.perf_counter() - start > 2 * AROUND_INTERVAL:
                client.set(version_key(app_settings.KEY_PREFIX), uuid.uuid4().hex)
                moved_at = time.perf_counter()
            began = time.perf_counter()
            table = policy_table.get_table()
            table.match(method="GET", path=path, scope=scope)
            latencies.append(time.perf_counter() - began)
            if swapped_at is None and table is not first:
                swapped_at = time.perf_counter()
            if time.perf_counter() - start > 10:
                raise RuntimeError("the new table was never served")
            time.sleep(REQUEST_GAP)
    assert moved_at is not None and swapped_at is not None
    return AroundAChange(latencies, swapped_at - moved_at)


def around_a_change(ctx: Context) -> tuple[str, Target]:
    """The slowest request around a change, the table built in the background and (as
    before) by the request that checks, against the median request and a reload."""
    from ratelimits.models import Policy

    size = ctx.scaled(AROUND_SIZE, 200)
    Policy.objects.bulk_create(
        Policy(
            name=f"p{i:05d}", endpoint=endpoint_of(i), algorithm="fixed_window", limit=10, window=60
        )
        for i in range(size)
    )
    reload = median(time_per_call(policy_table.load_table, 1) for _ in range(ctx.runs))
    runs: dict[bool, list[AroundAChange]] = {}
    try:
        with override_settings(RATELIMITS={"POLICY_REFRESH_INTERVAL": AROUND_INTERVAL}):
            for in_background in (True, False):
                policy_table.set_source(
                    policy_source.load, policy_source.close_connections, in_background=in_background
                )
                runs[in_background] = [serve_around_a_change(ctx, size) for _ in range(ctx.runs)]
    finally:
        policy_table.set_source(policy_source.load, policy_source.close_connections)
        Policy.objects.all().delete()

    def typical(in_background: bool, figure: Callable[[AroundAChange], float]) -> float:
        return median(figure(run) for run in runs[in_background])

    rows = [
        [
            label,
            f"{typical(in_background, lambda r: median(r.latencies)) * 1e6:.1f}",
            f"{typical(in_background, lambda r: percentile(r.latencies, 0.99)) * 1e6:.1f}",
            f"**{typical(in_background, lambda r: max(r.latencies)) * 1e3:.2f}**",
            f"{typical(in_background, lambda r: r.in_force_after) * 1e3:.0f}",
            f"{typical(in_background, lambda r: len(r.latencies)):.0f}",
        ]
        for label, in_background in (
            ("built in the background (now)", True),
            ("built by the request that checks (before)", False),
        )
    ]
    slowest = typical(True, lambda r: max(r.latencies))
    body = "\n\n".join(
        [
            markdown_table(
                [
                    f"around a change, {size:,} policies",
                    "median request (µs)",
                    "p99 (µs)",
                    "slowest (ms)",
                    "new table in force after the stamp moved (ms)",
                    "requests per run",
                ],
                rows,
            ),
            f"A reload of the {size:,} policies from the database takes {reload * 1e3:.0f} ms "
            f"(median of {ctx.runs}). Built in the background, the slowest request around a "
            f"change took {slowest * 1e3:.2f} ms, "
            f"{slowest / typical(True, lambda r: median(r.latencies)):.0f} times the median "
            "request; built by the request that checks, it waited for the whole reload.",
        ]
    )
    target = Target(
        f"the slowest request around a change at {size:,} policies",
        f"{slowest * 1e3:.2f} ms (reload {reload * 1e3:.0f} ms)",
        f"<= {AROUND_TARGET:.0%} of a reload",
        slowest <= AROUND_TARGET * reload,
    )
    return body, target


def run(ctx: Context) -> Section:
    calls = ctx.scaled(20_000, 200)
    rows, figures = [], {}
    for size in SIZES:
        table = table_of(size)
        path, scope = f"/api/v{size - 1}/items/42", "scope-0"
        assert len(table.match(method="GET", path=path, scope=scope)) == 2

        def indexed(table=table, path=path, scope=scope):
            return table.match(method="GET", path=path, scope=scope)

        naive = every_glob_tried(table)
        ours = median(time_per_call(indexed, calls) for _ in range(ctx.runs)) * 1e6
        before = median(
            time_per_call(lambda n=naive, p=path, s=scope: n("GET", p, s), calls)
            for _ in range(ctx.runs)
        )
        figures[size] = ours
        rows.append([size, f"**{ours:.2f}**", f"{before * 1e6:.2f}"])
    growth = figures[SIZES[-1]] / figures[SIZES[0]]
    body = "\n\n".join(
        [
            __doc__.split("\n\n", 1)[1].strip(),
            markdown_table(["policies", "match (µs, indexed)", "every glob tried (µs)"], rows),
            f"At {SIZES[-1]:,} policies matching costs {growth:.2f}x what it costs at {SIZES[0]}.",
        ]
    )
    target = Target(
        f"matching at {SIZES[-1]:,} policies, half globs, over matching at {SIZES[0]}",
        f"{growth:.2f}x",
        f"<= {TARGET}x",
        growth <= TARGET,
    )
    around, around_target = around_a_change(ctx)
    return Section(
        "Matching: policies per request as the table grows",
        body + "\n\n" + around,
        [target, around_target],
    )
