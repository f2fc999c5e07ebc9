"""The soak's report: ``docs/soak.md`` (or wherever ``--report`` says), written from the
checked results of every topology, with the picture beside it."""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Iterable, Sequence
from pathlib import Path

from soak import checker, faults, limits, memcheck, mix, recovery
from soak.verdict import Result

INTRO = """\
# Soak: every topology, every face, under faults

`make soak` serves the demo site (with two views of its own, for the faces the demo
has no plain view for) under gunicorn (2 sync workers) and uvicorn (2 workers, the async
path), limits it with its own policies (`soak/policies.json`, imported with
`manage.py ratelimits import`), and runs a steady load against both servers while faults
happen, on each Redis topology in turn: one server, Sentinel (a primary, a replica and 3
sentinels) and a Redis Cluster (3 primaries, a fourth added mid-run). It writes down every
request, then a checker reads that history and says which invariants held; any
violation makes the run exit non-zero, naming it.

```console
$ make soak                                   # SOAK_SECONDS=600: 200 s per topology
$ SOAK_SECONDS=120 SOAK_REPORT=test-output/soak/soak.md make soak   # what CI runs
```

`SOAK_SECONDS` is the load's length over all three topologies (at least 40 s each); each
topology adds about half a minute to start, warm up, and watch the leases go. The report
goes to `SOAK_REPORT` (this page by default) and the picture beside it; the history
(one JSON line per request, the faults, the memory samples) stays in `test-output/soak/`.

## What runs

| policy | algorithm | limit | face | endpoint |
|---|---|---|---|---|
{policies}

Each client names itself in `X-Soak-Client`, which every per-client policy counts by:
4 heavy clients send about twice their limits, 8 light ones about two thirds, and one
request in five comes from a client never seen before (three quarters of those to the
month quota, whose keys stay all month). {threads} threads share the load at {rate:g} requests a
second in all, each over keep-alive connections to both servers, paced, bounded in time
and count.

Faults, at fractions of each topology's run, each at least {gap:g} s after the last one
ended:

| topology | faults, in order |
|---|---|
{schedules}

- **flush**: `FUNCTION FLUSH` and `SCRIPT FLUSH` on every primary; **pause**: `SIGSTOP`,
  then `SIGCONT` {pause:g} s later; **kill**: `SIGKILL`, started again empty {down:g} s later
  (on the cluster, one of the primaries).
- **failover-kill** (Sentinel): the primary killed; the sentinels (down after 3 s)
  promote the replica; the old primary comes back empty and becomes its replica.
  **failover**: an operator's `SENTINEL FAILOVER`.
- **reshard** (Cluster): a primary added (`CLUSTER MEET`), and a quarter of each
  primary's slots moved to it with their keys, {part} at a time, by the steps of
  `redis-cli --cluster reshard` (`ratelimits.testutils.SlotMigration`).
- **lower**: three limits halved by `manage.py ratelimits import`; **restore**: set back
  with `Policy.save()`, as the admin does; **worker**: `SIGKILL` on a gunicorn worker.

## What the checker verifies

- **No 5xx**, no status but 200 and 429, and every request answered but those a killed
  worker was serving.
- **No window over its limit.** A response that names its policy in `RateLimit-Policy`
  was decided by Redis; one that does not took the policy's fail mode, which counts
  nothing. Only the client's send and receive times are known, so an admission counts in
  a window only when its whole `[send, recv]` lies inside (the count found is at most the
  true one: a count over the limit is a real over-admission). Sliding windows are tried
  at every admission; `fixed_window` and `sliding_counter` per clock-aligned window (the
  counter's estimate is at least the current window's count), the quota per calendar
  month in its zone; `token_bucket` by GCRA's bound (`k` admissions within `s` seconds:
  `k <= burst + s / T`); `concurrency` by the slots certainly held at once (each from
  `recv - 0.3 s` to `send + 0.3 s`, the view taking 0.3 s). A server that came back empty
  starts counting again: windows are checked on each side of it. After a limit edit the
  old limit stays possible until {stale:g} s after the edit.
- **The bound around a Sentinel failover.** The old primary takes writes until the
  sentinels demote it, and its demotion throws them away; the limiter moves when the
  sentinels announce the new primary (0.11 to 0.17 s in
  [the Sentinel tests](cluster.md#sentinel)). The bound checked: a window holds at most
  its limit plus the admissions decided between the `SENTINEL FAILOVER` and
  {margin:g} s after the sentinels named the new primary (for a killed primary: the half
  second before it died, not yet replicated). Those admissions are left out of the
  judged count; the tables show how far the full count went. While a slot moves to a new
  primary, [Growing a cluster](cluster.md#growing-a-cluster-while-it-serves) bounds a
  client at its limit give or take its fail-mode answers; those count nothing here, so
  the bound checked is the limit itself.
- **Recovery** within {recovery:g} s of each fault's end: a second of answers from then
  on, none in the fail mode. After a limit edit, no request decided by the old limit more
  than {recovery:g} s after it.
- **Concurrency slots returned**: {give_back:g} s after the load stopped, no live lease but
  of a request a fault cut off; no lease key left once the leases have ended.
- **Memory**: in every sample (every 2 s), each policy's keys (`MEMORY USAGE`) within
  its clients so far times the per-client figure of `ratelimits.tools.memory`, made a
  bound (that figure was measured with an address as the identity: plus the longer name
  of a hashed header identity, and one allocator size class). And once the site stopped,
  `used_memory` (less buffers and cached code) above its baseline within all the clients
  times the same figures plus {keyspace} B a key (the keyspace's own entries, which
  `MEMORY USAGE` leaves out), the bookkeeping keys, and {own} KB a primary for what Redis
  keeps for itself after restarts, promotions and reshards (measured 34 to 235 KB).
  The baseline is taken after the site has served 6 s of the load (the code flushed and
  loaded again meanwhile), stopped, and every key was deleted: a server keeps a few
  hundred KB more once its first clients came and went, whatever the load or the flushes
  after (the table below: kept after first use).
"""


def write(results: Sequence[Result], seconds: float, path: Path, picture: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown(results, seconds, picture.name), encoding="utf-8")


def markdown(results: Sequence[Result], seconds: float, picture: str) -> str:
    lines = [intro(), *last_run(results, seconds, picture)]
    return "\n".join(lines).rstrip() + "\n"


def intro() -> str:
    rows = mix.policy_rows()
    policies = "\n".join(
        f"| `{row['name']}` | `{row['algorithm']}`"
        + (f" (calendar {row['calendar']}, {row['time_zone']})" if row.get("calendar") else "")
        + f" | {limit_text(row)} | {mix.BY_POLICY[row['name']].face} | "
        f"`{mix.BY_POLICY[row['name']].path}` |"
        for row in rows
    )
    schedules = "\n".join(
        f"| {name} | " + ", ".join(f"{kind} ({fraction:.0%})" for fraction, kind in plan) + " |"
        for name, plan in faults.SCHEDULES.items()
    )
    return INTRO.format(
        policies=policies,
        threads=mix.THREADS,
        rate=mix.RATE,
        gap=faults.GAP,
        schedules=schedules,
        pause=faults.PAUSE,
        down=faults.DOWN,
        part=faults.RESHARD_PART,
        stale=limits.STALE,
        margin=faults.SWITCH_MARGIN,
        recovery=recovery.RECOVERY,
        give_back=checker.GIVE_BACK,
        keyspace=memcheck.KEYSPACE_BYTES,
        own=memcheck.REDIS_OWN_BYTES // 1024,
    )


def limit_text(row: dict[str, object]) -> str:
    key = "in all" if row["key"] == "global" else "per client"
    if row["algorithm"] == "concurrency":
        return f"{row['limit']} at once {key} (lease {row['window']} s)"
    if row.get("calendar"):
        return f"{row['limit']} per month {key}"
    burst = f", burst {row['burst']}" if row.get("burst") else ""
    return f"{row['limit']} per {row['window']} s {key}{burst}"


def last_run(results: Sequence[Result], seconds: float, picture: str) -> list[str]:
    violations = [(r.meta.topology, c) for r in results for c in r.violations]
    began = min((r.meta.started for r in results if r.meta.started), default=0.0)
    when = datetime.datetime.fromtimestamp(began, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    versions = ", ".join(sorted({r.meta.redis_version for r in results if r.meta.redis_version}))
    verdict = (
        "**Every invariant held.**"
        if not violations
        else f"**{len(violations)} violations** (listed at the end)."
    )
    lines = [
        "## The last run",
        "",
        f"{when}: `SOAK_SECONDS={seconds:g}`, on {os.cpu_count()} CPUs "
        f"({platform.python_implementation()} {platform.python_version()}, Redis {versions}). "
        + verdict,
        "",
        f"![Requests per second on each topology, faults shaded]({picture})",
        "",
        "### Requests",
        "",
        "| topology | seconds | requests | rate /s | admitted | denied | fail mode "
        "(admitted / denied) | 5xx | unanswered | p50 | p99 | slowest |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [requests_row(r) for r in results]
    lines += ["", "### Faults and recovery", ""]
    for result in results:
        lines += faults_table(result)
    lines += ["### Admission: no window over its limit", ""]
    lines += admissions_table(results)
    lines += ["", "### Memory and leases", ""]
    lines += memory_table(results)
    lines += ["", "### Every invariant", ""]
    for result in results:
        lines += [
            f"**{result.meta.topology}**",
            "",
            "| invariant | | figures |",
            "|---|---|---|",
        ]
        lines += [
            f"| {cell(c.name)} | {'held' if c.held else '**violated**'} | {cell(c.figures)} |"
            for c in result.checks
        ]
        lines.append("")
    if violations:
        lines += ["### Violations", ""]
        for topology, check in violations:
            lines.append(f"- **{topology}: {check.name}**: {check.figures}")
            lines += [f"  - {cell(problem)}" for problem in check.problems]
        lines.append("")
    return lines


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def requests_row(result: Result) -> str:
    if result.meta.error:
        return f"| {result.meta.topology} | the run failed | | | | | | | | | | |"
    f = result.figures
    kinds = f["kinds"]
    return (
        f"| {result.meta.topology} | {f['seconds']:.0f} | {f['requests']:,} | {f['rate']:.1f} | "
        f"{kinds.get('admitted', 0):,} | {kinds.get('denied', 0):,} | "
        f"{kinds.get('admitted (fail mode)', 0):,} / {kinds.get('denied (fail mode)', 0):,} | "
        f"{kinds.get('5xx', 0)} | {kinds.get('unanswered', 0)} | {f['p50_ms']:.1f} ms | "
        f"{f['p99_ms']:.0f} ms | {f['max_ms']:.0f} ms |"
    )


def faults_table(result: Result) -> list[str]:
    lines = [
        f"**{result.meta.topology}** ({result.meta.servers.get('redis', '')}; "
        f"fail-mode answers outside the faults: {result.figures.get('outside_faults', 0)})",
        "",
        "| at | fault | lasted | what happened | Redis deciding again | first 429 | "
        "fail-mode answers |",
        "|---|---|---|---|---|---|---|",
    ]
    recoveries = {id(r.fault): r for r in result.recoveries}
    for fault in result.faults:
        at = f"{fault.start - result.meta.started:.1f} s"
        if fault.skipped or fault.error:
            why = (
                "skipped: " + fault.note if fault.skipped else "failed: " + first_line(fault.error)
            )
            lines.append(f"| {at} | {fault.kind} | | {cell(why)} | | | |")
            continue
        found = recoveries.get(id(fault))
        lasted = f"{fault.end - fault.start:.2f} s"
        if found is None:
            lines.append(f"| {at} | {fault.kind} | {lasted} | {cell(fault.note)} | | | |")
        elif found.stale is not None:
            after = f"old limit last used {found.stale:.2f} s after"
            lines.append(f"| {at} | {fault.kind} | {lasted} | {cell(fault.note)} | {after} | | |")
        else:
            lines.append(
                f"| {at} | {fault.kind} | {lasted} | {cell(fault.note)} | "
                f"{seconds_text(found.decided)} | {seconds_text(found.denied)} | "
                f"{found.fallbacks} |"
            )
    lines.append("")
    return lines


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def seconds_text(value: float | None) -> str:
    return "not within 30 s" if value is None else f"{value:.2f} s"


def admissions_table(results: Iterable[Result]) -> list[str]:
    lines = [
        "The fullest window each policy saw, of its bound; and, where a failover's switch "
        "left admissions out, how far the full count went over the limit against the bound "
        "(those admissions).",
        "",
        "| policy | topology | admitted by Redis | windows | fullest | around failovers | "
        "across a wipe | held |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        for found in result.admissions:
            around = ""
            if found.uncertain:
                over = max(0.0, found.everything.worst)
                around = f"{over:+g} (bound +{found.uncertain})"
            lines.append(
                f"| `{found.policy}` ({found.algorithm}) | {result.meta.topology} | "
                f"{found.admitted:,} | {found.judged.windows:,} | "
                f"{found.judged.peak} of {found.judged.peak_bound} | {around} | "
                f"{found.across_wipe or ''} | {'yes' if found.judged.held else '**no**'} |"
            )
    return lines


def memory_table(results: Iterable[Result]) -> list[str]:
    lines = [
        "| topology | clients | most keys at once (bytes) | fullest policy vs its bound | "
        "used_memory above the baseline after the stop | bound | Redis's own (less the keys "
        "left) | kept after first use | live leases after the stop | lease keys left |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        memory = result.figures.get("memory")
        if not memory:
            continue
        worst = max(memory["worst"].items(), key=lambda item: item[1], default=("", 0.0))
        lease = next((c for c in result.checks if c.name.startswith("concurrency")), None)
        looks = result.leases
        settled = next(
            (x for x in looks if x.at >= result.meta.stopped + checker.GIVE_BACK),
            looks[-1] if looks else None,
        )
        live = len(settled.live) if settled else "?"
        left = looks[-1].keys if looks else "?"
        lines.append(
            f"| {result.meta.topology} | {memory.get('clients', 0):,} | "
            f"{memory['peak_keys']:,} ({memory['peak_keys_bytes']:,} B) | "
            f"`{worst[0]}` {worst[1]:.0%} | {memory.get('final_above', 0):,} B | "
            f"{memory.get('bound', 0):,} B | {memory.get('own', 0):,} B over "
            f"{memory.get('servers', 0)} primaries | "
            f"{result.meta.memory.get('first_use', 0):,} B | "
            f"{live} | {left}{'' if lease is None or lease.held else ' (violated)'} |"
        )
    return lines
