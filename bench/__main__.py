"""``python -m bench``: run the benchmarks and write ``RESULTS.md`` and ``results.png``.

::

    python -m bench [--quick] [--only NAME ...] [--placement split|same] [--runs N] [--out DIR]

Starts one throw-away redis-server and pins it and this process to CPUs (``split``: this
process on the first CPU, Redis on the second; ``same``: both on the first; unpinned
when there are too few CPUs or no ``taskset``), sets Django up with :mod:`bench.settings`
on a fresh SQLite file, then runs the modules of :data:`MODULES` in order. Each starts
with an empty Redis that no other connection holds, no policies and no per-process
state. A module not written yet is skipped with a note; one that fails is reported (its
traceback in the report) and makes the exit status 1, after the other modules ran and
the report was written.

``--quick`` measures tiny counts once, to prove the code runs (the tests use it), and
writes to a temporary directory unless ``--out`` says where.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench import report
from bench.common import BENCH_DIR, Context, Section, pin_process
from ratelimits.testutils import RedisServer

#: The benchmark modules, in the order they run.
MODULES = (
    "hotpath",
    "overhead",
    "latency",
    "asyncpath",
    "afterwards",
    "signin",
    "roundtrips",
    "matching",
    "memory",
    "e2e",
    "wrk",
    "accuracy",
    "floods",
    "profile",
    "reloads",
    "simulate",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts, one run")
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=MODULES, help="modules")
    parser.add_argument("--placement", choices=("split", "same"), default="split")
    parser.add_argument("--runs", type=int, default=None, help="runs per figure (median)")
    parser.add_argument("--out", type=Path, default=None, help="where the report goes")
    args = parser.parse_args(argv)
    if args.runs is None:
        args.runs = 1 if args.quick else 5
    if args.runs < 1 or (args.runs < 5 and not args.quick):
        parser.error("--runs must be at least 5 (at least 1 with --quick)")
    return args


def placement(kind: str) -> tuple[int | None, int | None]:
    """``(client CPU, Redis CPU)`` for ``kind``; ``(None, None)`` when pinning is not
    possible (no affinity API, no ``taskset``, or too few CPUs for ``split``)."""
    if not hasattr(os, "sched_getaffinity") or shutil.which("taskset") is None:
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    if kind == "same":
        return cpus[0], cpus[0]
    if len(cpus) < 2:
        return None, None
    return cpus[0], cpus[1]


def setup_django(server: RedisServer, workdir: Path) -> None:
    """Point Django at the benchmark's Redis and a fresh SQLite file, and migrate it."""
    os.environ["REDIS_URL"] = server.url
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    os.environ["BENCH_DB"] = str(workdir / "bench.sqlite3")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def fresh_state(ctx: Context) -> None:
    """No policies, an empty Redis with no other connection open (pools reconnect on
    their next use), no per-process state of the app."""
    from ratelimits.models import Policy
    from ratelimits.testutils import reset_state

    Policy.objects.all().delete()
    reset_state()
    with ctx.client() as client:
        client.flushall()
        client.client_kill_filter(_type="normal", skipme=True)


def run_module(name: str, ctx: Context) -> tuple[Section | None, bool]:
    """``(section, ok)``: ``(None, True)`` when the module does not exist yet."""
    try:
        module = importlib.import_module(f"bench.{name}")
    except ImportError as e:
        if e.name == f"bench.{name}":
            print(f"[bench] {name}: no bench/{name}.py yet; skipped", flush=True)
            return None, True
        return _failed(name), False
    fresh_state(ctx)
    started = time.monotonic()
    try:
        section = module.run(ctx)
    except Exception:
        return _failed(name), False
    print(f"[bench] {name}: {section.title} ({time.monotonic() - started:.0f} s)", flush=True)
    return section, True


def _failed(name: str) -> Section:
    text = traceback.format_exc()
    print(f"[bench] {name}: FAILED\n{text}", file=sys.stderr, flush=True)
    return Section(f"{name}: failed", f"The module raised:\n\n```\n{text}```\n")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = [name for name in MODULES if not args.only or name in args.only]
    out = args.out or (
        Path(tempfile.mkdtemp(prefix="ratelimits-bench-")) if args.quick else BENCH_DIR
    )
    out.mkdir(parents=True, exist_ok=True)
    client_cpu, redis_cpu = placement(args.placement)
    if client_cpu is None:
        print("[bench] not pinned (too few CPUs, or no taskset)", flush=True)
    pin_process(client_cpu)
    workdir = Path(tempfile.mkdtemp(prefix="ratelimits-bench-db-"))
    server = RedisServer(cpus=None if redis_cpu is None else str(redis_cpu))
    ok = True
    sections: list[tuple[str, Section]] = []
    try:
        server.start()
        setup_django(server, workdir)
        ctx = Context(server, client_cpu, redis_cpu, runs=args.runs, quick=args.quick)
        for name in names:
            section, module_ok = run_module(name, ctx)
            ok = ok and module_ok
            if section is not None:
                sections.append((name, section))
                print(f"\n## {section.title}\n\n{section.markdown}\n", flush=True)
                if section.targets:
                    targets = [(section.title, t) for t in section.targets]
                    print(report.targets_table(targets) + "\n", flush=True)
        written = report.write(ctx, sections, out)
        print("[bench] wrote " + ", ".join(str(path) for path in written), flush=True)
    finally:
        server.__exit__(None, None, None)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
