"""The wheel carries everything the app loads at run time: Lua scripts, migrations, py.typed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import pytest

import ratelimits

REPO = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("ratelimits", "lua")
SOURCE_FILE_GLOBS = ("pyproject.toml", "setup.cfg", "MANIFEST.in", "README*", "LICEN[CS]E*")
EXPECTED = (
    "ratelimits/lua/decide.lua",
    "ratelimits/lua/sliding_log.lua",
    "ratelimits/lua/sliding_counter.lua",
    "ratelimits/lua/fixed_window.lua",
    "ratelimits/lua/prelude.lua",
    "ratelimits/py.typed",
    "ratelimits/migrations/0001_initial.py",
    # One module of every subpackage: a package left out of pyproject.toml is missing here.
    "ratelimits/engine/limiter.py",
    "ratelimits/engine/store/scripts.py",
    "ratelimits/http/facts.py",
    "ratelimits/admin/policy.py",
    "ratelimits/tools/policy_io.py",
    "ratelimits/cli/probe.py",
)


def copy_sources(dest: Path) -> Path:
    """What a build reads, copied to ``dest`` so that no build output lands in the repo."""
    dest.mkdir()
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


@pytest.mark.slow
def test_the_wheel_carries_the_package_data(tmp_path: Path) -> None:
    before = build_outputs()
    source = copy_sources(tmp_path / "src")
    out = tmp_path / "dist"
    result = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), "."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert build_outputs() == before, "the build wrote into the repository"

    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]
    assert wheel.name.startswith(f"ratelimits-{ratelimits.__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        missing = [name for name in EXPECTED if name not in names]
        assert missing == [], sorted(names)
        meta_name = f"ratelimits-{ratelimits.__version__}.dist-info/METADATA"
        assert meta_name in names, sorted(names)
        meta = HeaderParser().parsestr(archive.read(meta_name).decode("utf-8"))
        decide = archive.read("ratelimits/lua/decide.lua").decode("utf-8")
    assert meta["Name"] == "ratelimits"
    assert meta["Version"] == ratelimits.__version__
    assert decide == (REPO / "lua" / "decide.lua").read_text(encoding="utf-8")
    # Only the package: no tests, demo project or benchmarks.
    assert {name.split("/")[0] for name in names} == {
        "ratelimits",
        f"ratelimits-{ratelimits.__version__}.dist-info",
    }

    # The installed package finds its scripts (ratelimits.lua is a namespace package there).
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    probe = (
        "import ratelimits.engine.store.scripts as s; "
        "print(s.__file__); print(s.missing_parts()); print(len(s.decide_source()))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert loaded.returncode == 0, loaded.stderr
    module_file, missing_parts, length = loaded.stdout.splitlines()
    assert module_file.startswith(str(site))
    assert missing_parts == "[]"
    assert int(length) > 1000
