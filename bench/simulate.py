"""`ratelimits simulate`: lines per second replaying an access log through the real decide
code, with 1, 3 and 10 policies (each line meets every policy).

A generated `combined` log: 2,000 clients, a few of them abusive, 20 requests a second of
log time; sliding_log policies of 60 s on the URL name every line resolves to. The figure
is the whole replay (reading, parsing, matching, deciding on the benchmark's server,
counting), from the command's own entry point, median of the runs.
"""

from __future__ import annotations

import random
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import redis

from bench.common import Context, Section, Target, markdown_table, median
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.tools.simulate import Request, simulate
from ratelimits.tools.simulate.routing import view_names

POLICIES = (1, 3, 10)
TARGET = 30_000


def write_log(path: Path, lines: int) -> None:
    rng = random.Random(5)
    start = 1_795_000_000.0
    with path.open("w") as out:
        for i in range(lines):
            at = start + i * 0.05
            seconds = int(at)
            stamp = datetime.fromtimestamp(seconds, tz=UTC).strftime("%d/%b/%Y:%H:%M:%S")
            millis = int((at - seconds) * 1000)
            if rng.random() < 0.2:
                address = f"203.0.113.{rng.randrange(5)}"
            else:
                address = f"198.51.{rng.randrange(8)}.{rng.randrange(250)}"
            out.write(
                f'{address} - - [{stamp}.{millis:03d} +0000] "GET /api/search/?q={i} HTTP/1.1" '
                '200 512 "-" "bench/1.0"\n'
            )


def policies(count: int) -> list[CompiledPolicy]:
    return [
        CompiledPolicy.build(
            name=f"p{i}",
            endpoint="api:search",
            algorithm="sliding_log",
            limit=20 + i,
            window=60,
            key="ip",
        )
        for i in range(count)
    ]


def run(ctx: Context) -> Section:
    lines = ctx.scaled(200_000, 2_000)
    view_names("GET", "/api/search/")  # the URLconf imported before the clock starts
    client = redis.Redis.from_url(ctx.url)
    rows = []
    figures = {}
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "access.log"
        write_log(log, lines)
        for count in POLICIES:
            rates = []
            for _ in range(ctx.runs):
                record = simulate(Request(paths=[str(log)], policies=policies(count)), client)
                rates.append(record["replayed"] / record["seconds"])
            figures[count] = median(rates)
            rows.append([count, f"{lines:,}", f"{figures[count]:,.0f}"])
    table = markdown_table(["policies", "lines", "lines per second"], rows)
    met = figures[1] >= TARGET
    return Section(
        "simulate: access log lines replayed per second",
        __doc__.split("\n\n", 1)[1] + "\n" + table + "\n",
        targets=[
            Target(
                "simulate, one policy",
                f"{figures[1]:,.0f} lines/s",
                f">= {TARGET:,} lines/s",
                None if ctx.quick else met,
            )
        ],
    )
