"""How a policy file's problems are told: :class:`PolicyFileError`, a value named as a file
author would name it, and a model's validation errors as lines."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError


class PolicyFileError(Exception):
    """A policy file that cannot be used; ``str(e)`` is one line per problem, naming the place.

    The problems are also available as a list in :attr:`problems`.
    """

    def __init__(self, problems: str | Iterable[str]) -> None:
        problems = [problems] if isinstance(problems, str) else list(problems)
        self.problems: list[str] = [" ".join(problem.splitlines()) for problem in problems]
        super().__init__("\n".join(self.problems))


def describe(value: Any) -> str:
    """``value`` as a file author would name it: ``a boolean (true)``, ``a list``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__} ({value!r})"


def validation_lines(error: ValidationError) -> list[str]:
    """The messages of a model's ``full_clean()``, one a line, each after its field's name."""
    lines = []
    for name, messages in error.message_dict.items():
        for message in messages:
            lines.append(message if name == NON_FIELD_ERRORS else f"{name}: {message}")
    return lines
