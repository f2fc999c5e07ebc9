"""``docs/api.md`` is the public API, and the code agrees: every name it lists imports,
each public module's ``__all__`` is exactly its list there (a public name added or
removed without the page fails here), every other top-level module says it is internal,
``import ratelimits`` stays light, and the demo imports nothing else."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ratelimits
from tests.wheel import REPO

API_PAGE = REPO / "docs" / "api.md"
PACKAGE = Path(ratelimits.__file__).resolve().parent
#: How an internal top-level module's or package's docstring opens.
INTERNAL = "Internal, not part of the public API"


def documented() -> dict[str, list[str]]:
    """Each module the page lists (a ``### `module``` heading) with the names listed
    under it (``- `name`: ...``); a module listed alone (a URL conf) has none."""
    found: dict[str, list[str]] = {}
    module = None
    for line in API_PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            module = None
        elif heading := re.fullmatch(r"### `(ratelimits[\w.]*)`", line):
            module = heading.group(1)
            assert module not in found, f"{module} is listed twice"
            found[module] = []
        elif module and (item := re.match(r"- `(\w+)`", line)):
            found[module].append(item.group(1))
    return found


DOCUMENTED = documented()
WITH_NAMES = sorted(module for module, names in DOCUMENTED.items() if names)
URL_CONFS = sorted(module for module, names in DOCUMENTED.items() if not names)


def test_the_page_lists_the_faces_models_signals_and_test_helpers() -> None:
    """The parser read the page (a heading format change would empty it)."""
    assert DOCUMENTED["ratelimits.throttling"] == ["PolicyThrottle"]
    assert {"Policy", "PolicyOverride"} <= set(DOCUMENTED["ratelimits.models"])
    assert "reset_state" in DOCUMENTED["ratelimits.testutils"]
    assert URL_CONFS == ["ratelimits.urls", "ratelimits.urls.metrics", "ratelimits.urls.usage"]


@pytest.mark.parametrize("module", WITH_NAMES)
def test_each_public_module_declares_exactly_what_the_page_lists(module: str) -> None:
    imported = importlib.import_module(module)
    listed = DOCUMENTED[module]
    assert len(listed) == len(set(listed)), f"{module}: a name is listed twice"
    missing = [name for name in listed if not hasattr(imported, name)]
    assert missing == [], f"{module}: listed in docs/api.md but not importable"
    declared = getattr(imported, "__all__", None)
    assert declared is not None, f"{module} has no __all__"
    assert sorted(declared) == sorted(listed), f"{module}: __all__ and docs/api.md differ"


@pytest.mark.parametrize("module", URL_CONFS)
def test_each_public_url_conf_is_one_to_include(module: str) -> None:
    imported = importlib.import_module(module)
    assert imported.urlpatterns
    assert isinstance(imported.app_name, str)
    assert not hasattr(imported, "__all__")


def public_parents() -> set[str]:
    """The top-level names the page lists, or lists something under (``contrib``)."""
    return {module.split(".")[1] for module in DOCUMENTED if module != "ratelimits"}


def docstring(name: str, is_package: bool) -> str:
    path = PACKAGE / name / "__init__.py" if is_package else PACKAGE / f"{name}.py"
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def internal_modules() -> list[tuple[str, bool]]:
    return sorted(
        (info.name, info.ispkg)
        for info in pkgutil.iter_modules([str(PACKAGE)])
        if info.name not in public_parents()
    )


def test_every_other_top_level_module_says_it_is_internal() -> None:
    unmarked = [
        name
        for name, is_package in internal_modules()
        if not docstring(name, is_package).startswith(INTERNAL)
    ]
    assert unmarked == []


def test_the_page_names_every_internal_module() -> None:
    text = API_PAGE.read_text(encoding="utf-8")
    section = text[
        text.index("## What is internal") : text.index(
            "\n## ", text.index("## What is internal") + 1
        )
    ]
    named = set(re.findall(r"`ratelimits\.(\w+)`", section)) - public_parents()
    assert named == {name for name, _ in internal_modules()}


def test_no_public_module_is_marked_internal() -> None:
    marked = [
        module
        for module in DOCUMENTED
        if module != "ratelimits"
        and (importlib.import_module(module).__doc__ or "").startswith(INTERNAL)
    ]
    assert marked == []


def test_the_engine_package_re_exports_nothing() -> None:
    import ratelimits.engine as engine

    assert not hasattr(engine, "__all__")
    source = (PACKAGE / "engine" / "__init__.py").read_text(encoding="utf-8")
    body = ast.parse(source).body
    assert all(isinstance(node, ast.Expr) for node in body)  # a docstring, nothing else


def test_importing_ratelimits_imports_nothing_else() -> None:
    """Settings files may import it: no Django models, no Redis client, no submodule."""
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, ratelimits; print(ratelimits.__version__); print(sorted(m for m in "
            "sys.modules if m.startswith(('ratelimits.', 'django', 'redis'))))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    version, loaded = run.stdout.splitlines()
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", version)
    assert loaded == "[]"
    bound = {
        target.id
        for node in ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    assert bound == {"__version__"}
    assert DOCUMENTED.get("ratelimits", []) == []  # documented in words, not as a module


def demo_references() -> list[tuple[str, str]]:
    """Each ``ratelimits`` name the demo project uses: ``(file, dotted name)``, from its
    imports and from dotted paths in strings (settings, ``include()``)."""
    found = []
    for path in sorted((REPO / "project").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = str(path.relative_to(REPO))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ratelimits"):
                found += [(where, f"{node.module}.{alias.name}") for alias in node.names]
            elif isinstance(node, ast.Import):
                found += [(where, a.name) for a in node.names if a.name.startswith("ratelimits")]
            elif isinstance(node, ast.Constant) and re.fullmatch(
                r"ratelimits(\.\w+)+", str(node.value)
            ):
                found.append((where, node.value))
    return found


def is_public(dotted: str) -> bool:
    if dotted in DOCUMENTED:
        return True
    module, _, name = dotted.rpartition(".")
    return name in DOCUMENTED.get(module, ())


def test_the_demo_uses_only_the_public_api() -> None:
    references = demo_references()
    assert ("project/settings.py", "ratelimits.throttling.PolicyThrottle") in references
    assert [ref for ref in references if not is_public(ref[1])] == []


def test_the_check_of_the_demo_sees_an_internal_import() -> None:
    assert not is_public("ratelimits.tools.servers.server_name")
    assert not is_public("ratelimits.engine.limiter")
    assert is_public("ratelimits.testutils.RedisServer")
