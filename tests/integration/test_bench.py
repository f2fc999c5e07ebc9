"""The benchmarks run: ``python -m bench --quick`` writes a complete report.

The quick pass measures tiny counts once (its figures mean nothing); this only proves that
every benchmark module present runs, and that the report has its sections, the targets
table and the chart. It starts its own Redis server and gunicorn, and writes to a
temporary directory, never over the committed ``bench/RESULTS.md``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import MODULES

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
TIMEOUT = 240


def test_quick_pass_writes_the_report(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "BENCH_DB")}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    output = f"stdout:\n{done.stdout[-5000:]}\nstderr:\n{done.stderr[-5000:]}"
    assert done.returncode == 0, output

    results = (tmp_path / "RESULTS.md").read_text()
    assert "## Targets" in results
    assert "| section | target | measured | wanted | met |" in results

    present = [name for name in MODULES if (ROOT / "bench" / f"{name}.py").is_file()]
    titles = dict(re.findall(r"^\[bench\] (\w+): (.+) \(\d+ s\)$", done.stdout, re.MULTILINE))
    for name in present:
        assert name in titles, f"bench/{name}.py did not report a section\n{output}"
        assert f"<!-- module: {name} -->\n## {titles[name]}\n" in results

    chart = (tmp_path / "results.png").read_bytes()
    assert chart.startswith(b"\x89PNG\r\n\x1a\n")


def test_the_async_path_module_measures_both_paths_and_prints_ratios(tmp_path: Path) -> None:
    """``--only asyncpath``: the engine's two calls and the middleware face through both
    handlers, each with its anchors, and the ratios between them."""
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "BENCH_DB")}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "asyncpath", "--out", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout[-5000:]}\nstderr:\n{done.stderr[-5000:]}"
    results = (tmp_path / "RESULTS.md").read_text()
    assert "<!-- module: asyncpath -->" in results
    for row in (
        "| decide (sync) |",
        "| await adecide |",
        "| await limits.aio moving window hit |",
        "| WSGI | RateLimitMiddleware |",
        "| ASGI | RateLimitMiddleware |",
        "| ASGI | limits.aio moving window |",
        "| WSGI | DRF AnonRateThrottle |",
        "| WSGI | django-ratelimit |",
    ):
        assert row in results, row
    assert re.search(r"`await adecide` over `decide`: \d+\.\d\dx", results)
    assert re.search(r"ASGI \(async view\) over WSGI \(sync view\): \d+\.\d\dx", results)
