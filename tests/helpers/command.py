"""The ``ratelimits`` management command run in process, and policy files' errors."""

from __future__ import annotations

import json
import re
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from ratelimits.tools.policy_files import PolicyFileError, plan_import


class Terminal(StringIO):
    """A stream that says it is a terminal (stderr for progress, stdin for prompts)."""

    def isatty(self) -> bool:
        return True


def run(*args: str, stderr: StringIO | None = None) -> str:
    """``manage.py ratelimits *args``; what it wrote to stdout."""
    out = StringIO()
    call_command(
        "ratelimits", *args, stdout=out, stderr=stderr if stderr is not None else StringIO()
    )
    return out.getvalue()


def run_json(*args: str) -> Any:
    """``manage.py ratelimits *args --json``, parsed."""
    return json.loads(run(*args, "--json"))


def cells(line: str) -> list[str]:
    """A table row's cells (columns are two or more spaces apart)."""
    return re.split(r"\s{2,}", line.strip())


def problems_of(rows: list[Any], *, prune: bool = False) -> list[str]:
    """The lines of the error ``plan_import(rows)`` raises (one per problem)."""
    with pytest.raises(PolicyFileError) as raised:
        plan_import(rows, prune=prune)
    lines = str(raised.value).splitlines()
    assert lines == raised.value.problems
    return lines
