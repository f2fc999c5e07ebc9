"""``python -m soak``: the soak on every topology, checked, with its report.

::

    python -m soak [--seconds N] [--report PATH.md] [--work DIR] [--only TOPOLOGY ...]
                   [--check-only]

``--seconds`` (default ``$SOAK_SECONDS``, else 600) is the load's length over all the
topologies, split evenly, at least :data:`MIN_SECONDS` each. Each topology runs in a
process of its own (:mod:`soak.run`, bounded by a timeout), writing its history into
``DIR/<topology>/``; then :mod:`soak.checker` reads every history, :mod:`soak.report`
writes the report and its picture (``PATH`` with ``.png``), and the exit status is 1
when any invariant was violated, each printed. ``--check-only`` runs nothing: it checks
the histories already in ``DIR`` again and rewrites the report.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from soak import checker, plot, report
from soak.site import ROOT
from soak.topology import TOPOLOGIES

MIN_SECONDS = 40.0
#: Seconds a topology's process may take beyond its load (start, warm-up, faults, leases).
OVERHEAD_TIMEOUT = 600.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--seconds",
        type=float,
        default=float(os.environ.get("SOAK_SECONDS") or 600),
        help="seconds of load over all the topologies ($SOAK_SECONDS, else 600)",
    )
    parser.add_argument(
        "--report", type=Path, default=ROOT / "docs" / "soak.md", help="the report's path"
    )
    parser.add_argument(
        "--work", type=Path, default=ROOT / "test-output" / "soak", help="where histories go"
    )
    parser.add_argument("--only", nargs="+", choices=list(TOPOLOGIES), help="topologies to run")
    parser.add_argument(
        "--check-only", action="store_true", help="check the histories in --work again"
    )
    return parser.parse_args(argv)


def run_topology(name: str, seconds: float, work: Path) -> Path:
    """One topology's run in its own process; its directory."""
    out = work / name
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        if old.is_file():
            old.unlink()
    command = [sys.executable, "-m", "soak.run", name, "--seconds", f"{seconds:g}"]
    command += ["--out", str(out)]
    print(f"== soak: {name}, {seconds:g} s of load", flush=True)
    with (out / "run.log").open("wb") as log:
        try:
            subprocess.run(
                command,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=seconds + OVERHEAD_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            print(f"   {name}: timed out", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = args.only or list(TOPOLOGIES)
    each = max(MIN_SECONDS, args.seconds / len(names))
    results = []
    for name in names:
        out = args.work / name if args.check_only else run_topology(name, each, args.work)
        result = checker.check(out)
        results.append(result)
        summary = result.figures
        print(
            f"   {name}: {summary.get('requests', 0):,} requests, "
            f"{summary.get('rate', 0.0):.1f}/s, {len(result.violations)} violations",
            flush=True,
        )
    picture = args.report.with_suffix(".png")
    report.write(results, args.seconds, args.report, picture)
    plot.draw(results, picture)
    print(f"== soak: report in {args.report}, picture in {picture}")
    violations = [(r.meta.topology, c) for r in results for c in r.violations]
    for topology, found in violations:
        print(f"VIOLATED {topology}: {found.name}: {found.figures}", file=sys.stderr)
        for problem in found.problems:
            print(f"    {problem}", file=sys.stderr)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
