"""The engine stays free of the faces' frameworks.

import-linter (``make lint``) checks the layers between the app's own modules and keeps
DRF and prometheus_client out of the engine, but it cannot name a part of Django; this
reads the engine's imports (function-level ones too) for the parts that belong to faces.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ratelimits.engine

ENGINE = Path(ratelimits.engine.__file__).resolve().parent
#: What only faces may import: request and response objects, the admin, commands, tests.
FACE_ONLY = ("django.http", "django.contrib.admin", "django.core.management", "django.test")


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_the_engine_imports_no_request_admin_or_command_module():
    modules = sorted(ENGINE.rglob("*.py"))
    assert len(modules) > 10  # the walk found the engine
    offending = {
        f"{path.relative_to(ENGINE)}: {name}"
        for path in modules
        for name in imported_modules(path)
        if name.startswith(FACE_ONLY)
    }
    assert offending == set()


def test_the_check_sees_an_offending_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from django.http import HttpResponse\n")
    assert "django.http" in imported_modules(sample)
