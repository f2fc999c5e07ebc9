"""``python -m bench.revisions [--against REV]``: the decide code's Redis CPU per decision,
this tree's against an earlier revision's, in one run on one server.

Both revisions' Lua is loaded into one throw-away redis-server as two function libraries
(the earlier one read with ``git show REV:lua/...``, in the order its ``scripts.py``
assembles the parts: :func:`parts_at`). For each plain policy (no calendar period, no
lockout, cost 1) the two take turns: a round sends ``--calls`` recording calls of one
revision from rotating client addresses, one at a time, every one admitted, and reads
the server's CPU per ``FCALL`` from ``INFO commandstats`` (``usec / calls``, as ``make
bench``'s hot path does), alternating which revision goes first. The figure is the
median of ``--runs`` rounds. Prints a Markdown table with each algorithm's ratio, this
tree's over the earlier revision's.

Those clients hold a few entries each, and nothing leaves their window. The logs are
measured again in steady state (:data:`STEADY_ENTRIES` entries in each client's window,
one leaving at each admission), the calls carrying their own clock; the ``limits``
anchor is not measured that way, so those rows have no ratio to it.

The default revision, 713c047, is the code before calendar quotas and lockouts changed
the window slot; the plain policies' arguments are the same in both.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from bench.__main__ import placement
from bench.common import markdown_table, median, pin_process
from ratelimits.testutils import RedisServer

REPO = Path(__file__).resolve().parents[1]
#: The plain policies measured, and each one's ARGV slots after ``now`` and ``record``.
ALGORITHMS = ("sliding_log", "compact_log", "sliding_counter", "fixed_window", "token_bucket")
LIMIT = 1000
WINDOW_MS = 3_600_000
CLIENTS = 1000
#: The logs again with clients in steady state: each of STEADY_CLIENTS holds
#: STEADY_ENTRIES entries in its window, and one leaves it at each of its admissions.
STEADY_ALGORITHMS = ("sliding_log", "compact_log")
STEADY_CLIENTS = 200
STEADY_ENTRIES = 40
#: Microseconds between two calls on the steady clock the calls carry (ARGV now).
STEADY_STEP_US = 1000
STEADY_WINDOW_MS = STEADY_CLIENTS * STEADY_ENTRIES * STEADY_STEP_US // 1000
STEADY_EPOCH_US = 1_800_000_000_000_000


def git_show(revision: str, path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{revision}:{path}"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout


def parts_at(revision: str) -> list[str]:
    """The Lua parts at ``revision``, in the order its ``scripts.py`` assembles them: listed
    by name, or with one file per algorithm of its registry (``engine/algorithms.py``, its
    ``Algorithm("<name>", ...)`` entries in order) in place of the generated ones."""
    source = git_show(revision, "ratelimits/engine/store/scripts.py")
    found = re.search(r"DECIDE_PARTS = \((.*?)\n\)", source, re.DOTALL)
    if found is None:
        raise SystemExit(f"{revision}: its scripts.py lists no DECIDE_PARTS to read")
    parts = []
    for line in found.group(1).splitlines():
        if "for algorithm in ALGORITHMS" in line:
            registry = git_show(revision, "ratelimits/engine/algorithms.py")
            parts += [f"{n}.lua" for n in re.findall(r'\bAlgorithm\(\s*"([a-z_]+)"', registry)]
        else:
            parts += re.findall(r'"([a-z_]+\.lua)"', line)
    return parts


def definitions_at(revision: str) -> str:
    """The decide code's definitions at ``revision``: its Lua parts, in its own order."""
    return "\n".join(git_show(revision, f"lua/{part}") for part in parts_at(revision))


def definitions_now() -> str:
    """This tree's definitions, as the app assembles them."""
    from ratelimits.engine.store import scripts

    return scripts._definitions()


def library(label: str, definitions: str) -> tuple[str, str]:
    """``(FUNCTION LOAD payload, function name)`` for ``definitions`` under ``label``."""
    function = f"ab_{label}_decide"
    return (
        f"#!lua name=ab_{label}\n{definitions}\nredis.register_function('{function}', decide)\n",
        function,
    )


def usec_per_call(client: redis.Redis, command: str = "fcall") -> float:
    """The server's µs per ``command`` since its statistics were last reset."""
    row = client.info("commandstats").get(f"cmdstat_{command}", {})
    return float(row["usec"]) / max(1, int(row["calls"]))


def in_turns(labels: list[str], runs: int, one: Callable[[str, int], float]) -> tuple[float, float]:
    """``(before, now)``: the medians over ``runs`` of ``one(label, run)``, every label
    measured in each run, alternating which goes first."""
    found: dict[str, list[float]] = {label: [] for label in labels}
    for run in range(runs):
        for label in labels if run % 2 == 0 else labels[::-1]:
            found[label].append(one(label, run))
    return median(found["before"]), median(found["now"])


def cpu_per_call(
    client: redis.Redis, function: str, algorithm: str, calls: int, start: int
) -> float:
    """The server's µs per ``FCALL`` over ``calls`` recording calls of ``function``, sent
    one at a time as the ``limits`` anchor and ``make bench``'s hot path send theirs (a
    pipeline runs its calls back to back on warm caches, and reads lower)."""
    client.config_resetstat()
    for i in range(start, start + calls):
        key = f"rl:{{ip:10.{i % CLIENTS // 250}.{i % 250}.1}}:ab-{function}:{algorithm}"
        client.fcall(function, 1, key, "", "1", algorithm, LIMIT, WINDOW_MS, "1", LIMIT, "1")
    return usec_per_call(client)


def steady_calls(
    client: redis.Redis | Any, function: str, algorithm: str, calls: int, clock: list[int]
) -> None:
    """``calls`` recording calls of ``function`` from the steady clients in turn, each
    carrying the time of the steady clock (``clock[0]``, advanced by each call)."""
    for _ in range(calls):
        clock[0] += 1
        tick = clock[0]
        key = f"rl:{{ip:10.9.{tick % STEADY_CLIENTS}.1}}:ab-{function}:{algorithm}"
        now = str(STEADY_EPOCH_US + tick * STEADY_STEP_US)
        client.fcall(
            function, 1, key, now, "1", algorithm, LIMIT, STEADY_WINDOW_MS, "1", LIMIT, "1"
        )


def steady_cpu_per_call(
    client: redis.Redis, function: str, algorithm: str, calls: int, clock: list[int]
) -> float:
    """The server's µs per ``FCALL`` over ``calls`` steady calls, sent one at a time."""
    client.config_resetstat()
    steady_calls(client, function, algorithm, calls, clock)
    return usec_per_call(client)


def measure_steady(
    client: redis.Redis, functions: dict[str, str], runs: int, calls: int
) -> list[list[object]]:
    """Rows for the logs in steady state, after two windows of traffic to reach it."""
    rows: list[list[object]] = []
    labels = list(functions)
    for algorithm in STEADY_ALGORITHMS:
        client.flushall()
        clocks = {label: [0] for label in labels}
        for label in labels:
            pipe = client.pipeline(transaction=False)
            steady_calls(
                pipe,
                functions[label],
                algorithm,
                2 * STEADY_CLIENTS * STEADY_ENTRIES,
                clocks[label],
            )
            pipe.execute()

        def one(
            label: str, run: int, algorithm: str = algorithm, clocks: dict[str, list[int]] = clocks
        ) -> float:
            return steady_cpu_per_call(client, functions[label], algorithm, calls, clocks[label])

        before, now = in_turns(labels, runs, one)
        label = f"{algorithm}, {STEADY_ENTRIES} in the window (steady)"
        rows.append([label, f"{before:.2f}", f"{now:.2f}", f"{now / before:.2f}x", ""])
    return rows


def limits_moving_window(server: RedisServer, runs: int, calls: int) -> float:
    """The anchor: the ``limits`` library's moving window, µs per ``EVALSHA``."""
    from limits import RateLimitItemPerHour
    from limits.storage import RedisStorage
    from limits.strategies import MovingWindowRateLimiter

    moving = MovingWindowRateLimiter(RedisStorage(server.url))
    item = RateLimitItemPerHour(LIMIT)
    moving.hit(item, "warm")
    client = server.client()
    found = []
    for run in range(runs):
        client.config_resetstat()
        for i in range(run * calls, (run + 1) * calls):
            moving.hit(item, f"client{i % CLIENTS}")
        found.append(usec_per_call(client, "evalsha"))
    return median(found)


def measure(
    client: redis.Redis, functions: dict[str, str], runs: int, calls: int
) -> list[list[object]]:
    rows: list[list[object]] = []
    labels = list(functions)
    for algorithm in ALGORITHMS:
        client.flushall()

        def one(label: str, run: int, algorithm: str = algorithm) -> float:
            return cpu_per_call(client, functions[label], algorithm, calls, run * calls)

        before, now = in_turns(labels, runs, one)
        rows.append([algorithm, f"{before:.2f}", f"{now:.2f}", f"{now / before:.2f}x"])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.revisions", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--against", default="713c047", help="the earlier revision")
    parser.add_argument("--runs", type=int, default=7, help="rounds per figure (median)")
    parser.add_argument("--calls", type=int, default=1000, help="calls per round (<= 1000)")
    args = parser.parse_args(argv)
    if not 1 <= args.calls <= LIMIT:
        parser.error(f"--calls must be 1 to {LIMIT}: every call must be admitted")
    client_cpu, redis_cpu = placement("split")
    pin_process(client_cpu)
    with RedisServer(cpus=None if redis_cpu is None else str(redis_cpu)) as server:
        client = server.client()
        functions = {}
        for label, definitions in (
            ("before", definitions_at(args.against)),
            ("now", definitions_now()),
        ):
            payload, functions[label] = library(label, definitions)
            client.function_load(payload, replace=True)
        rows = measure(client, functions, args.runs, args.calls)
        steady = measure_steady(client, functions, args.runs, args.calls)
        client.flushall()
        anchor = limits_moving_window(server, args.runs, args.calls)
    for row in rows:
        row.append(f"{float(str(row[2])) / anchor:.2f}x")
    rows += steady
    rows.append(["limits moving window (anchor)", "", f"{anchor:.2f}", "", "1.00x"])
    header = ["algorithm", f"{args.against} µs", "now µs", "now / before", "now / limits"]
    print(
        f"Redis CPU per decision (FCALL, INFO commandstats), median of {args.runs} rounds "
        f"of {args.calls} admitted calls, one server:\n"
    )
    print(markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
