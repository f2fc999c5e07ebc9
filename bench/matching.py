"""Matching a request to its policies as the policy table grows.

Half of the policies are path globs (`/api/v<i>/items/*`), half are names (a
`throttle_scope` or URL name). A request names one scope and has a path that one glob
matches; the figure is the time of :meth:`PolicyTable.match` (what
`PolicyThrottle.get_policies` does once the table is loaded). "Every glob tried" is the
same table matched the way it was before globs were indexed by their literal prefix: each
glob's pattern tried in turn.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

from bench.common import Context, Section, Target, markdown_table, median, time_per_call
from ratelimits.engine.policy import CompiledPolicy
from ratelimits.engine.table import PolicyTable

SIZES = (10, 1000, 5000)
#: Matching at 5,000 policies may cost at most this many times what it costs at 10.
TARGET = 2.0


def table_of(size: int) -> PolicyTable:
    policies = []
    for i in range(size):
        endpoint = f"/api/v{i}/items/*" if i % 2 else f"scope-{i}"
        policies.append(
            CompiledPolicy.build(
                name=f"p{i:05d}", endpoint=endpoint, algorithm="fixed_window", limit=10, window=60
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
    return Section("Matching: policies per request as the table grows", body, [target])
