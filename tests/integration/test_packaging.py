"""The distribution ``django-ratelimits``: the wheel builds without warnings, carries
everything the app loads at run time (Lua scripts, migrations, py.typed) and says what it
needs. The project test that installs it is ``tests/integration/test_fresh_project.py``."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

import pytest

import ratelimits
from tests.wheel import REPO, Built, build_wheel

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
    "ratelimits/http/request_facts.py",
    "ratelimits/admin/policy.py",
    "ratelimits/tools/policy_files/__init__.py",
    "ratelimits/tools/inventory/key_usage.py",
    "ratelimits/tools/endpoints/urlconf.py",
    "ratelimits/cli/check.py",
    "ratelimits/database/policy_source.py",
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


DIST_INFO = f"django_ratelimits-{ratelimits.__version__}.dist-info"


def metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        return HeaderParser().parsestr(archive.read(f"{DIST_INFO}/METADATA").decode("utf-8"))


@pytest.mark.slow
def test_the_wheel_builds_without_warnings(built: Built) -> None:
    warnings = [line for line in built.output.splitlines() if "warning" in line.lower()]
    assert warnings == []


@pytest.mark.slow
def test_the_distribution_is_django_ratelimits_with_extras(built: Built) -> None:
    assert built.wheel.name.startswith(f"django_ratelimits-{ratelimits.__version__}-")
    meta = metadata(built.wheel)
    assert meta["Name"] == "django-ratelimits"
    assert meta["Version"] == ratelimits.__version__
    assert set(meta.get_all("Provides-Extra")) == {"ninja", "prometheus", "yaml", "hiredis"}
    required = [r for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    assert sorted(r.split(">")[0].split("<")[0] for r in required) == [
        "Django",
        "django-redis",
        "djangorestframework",
        "redis",
    ]
    assert "Django>=5.2" in required
    django_versions = [
        c for c in meta.get_all("Classifier") if c.startswith("Framework :: Django ::")
    ]
    # Exactly what CI runs the suite on (.ci/run): Django 5.2 on Python 3.11, Django 6.1 on
    # the newest Python.
    assert django_versions == ["Framework :: Django :: 5.2", "Framework :: Django :: 6.1"]
    pythons = [
        c
        for c in meta.get_all("Classifier")
        if c.startswith("Programming Language :: Python :: 3.")
    ]
    assert pythons == [
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.13",
    ]


@pytest.mark.slow
def test_the_wheel_carries_the_package_data(built: Built, tmp_path: Path) -> None:
    wheel = built.wheel
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        missing = [name for name in EXPECTED if name not in names]
        assert missing == [], sorted(names)
        # Every package of the source tree: one left out of pyproject.toml is missing here.
        packages = sorted(
            path.relative_to(REPO).as_posix() for path in (REPO / "ratelimits").rglob("__init__.py")
        )
        assert [name for name in packages if name not in names] == []
        decide = archive.read("ratelimits/lua/decide.lua").decode("utf-8")
    assert decide == (REPO / "lua" / "decide.lua").read_text(encoding="utf-8")
    # Only the package: no tests, demo project or benchmarks.
    assert {name.split("/")[0] for name in names} == {"ratelimits", DIST_INFO}

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
