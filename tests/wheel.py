"""Building the wheel of the distribution from a copy of the sources, as a user's build
would: shared by ``tests/integration/test_packaging.py`` and
``tests/integration/test_fresh_project.py``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("ratelimits", "lua")
SOURCE_FILE_GLOBS = ("pyproject.toml", "setup.cfg", "MANIFEST.in", "README*", "LICEN[CS]E*")


def copy_sources(dest: Path) -> Path:
    """What a build reads, copied to ``dest`` so that no build output lands in the repo."""
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCE_DIRS:
        shutil.copytree(REPO / name, dest / name, ignore=ignore)
    for pattern in SOURCE_FILE_GLOBS:
        for path in REPO.glob(pattern):
            if path.is_file():
                shutil.copy2(path, dest / path.name)
    return dest


def build_outputs() -> set[str]:
    """Build leftovers in the repository's top folder."""
    return {p.name for p in REPO.iterdir() if p.name == "build" or p.name.endswith(".egg-info")}


@dataclass(frozen=True)
class Built:
    """The wheel the build made, and what the build printed."""

    wheel: Path
    output: str


def build_wheel(folder: Path) -> Built:
    """Build the wheel from a copy of the sources in ``folder`` (no build isolation: the
    build tools are the test environment's)."""
    before = build_outputs()
    source = copy_sources(folder / "src")
    out = folder / "dist"
    # Byte-compiling disabled is a warning of the environment, not of the configuration.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    result = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), "."],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert build_outputs() == before, "the build wrote into the repository"
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return Built(wheels[0], result.stdout + result.stderr)
