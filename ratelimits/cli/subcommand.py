"""A subcommand of ``manage.py ratelimits``: its name, its help, its arguments and its
body, declared together in the subcommand's own module (``SUBCOMMAND``), and the
arguments several subcommands share."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ratelimits.tools.policy_files import FORMATS

Run = Callable[[BaseCommand, dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Subcommand:
    """One subcommand: ``run(command, options)`` does it, with the options that
    ``add_arguments(parser)`` declares."""

    name: str
    help: str
    add_arguments: Callable[[CommandParser], None]
    run: Run


def add_json(parser: CommandParser) -> None:
    """``--json``: print JSON instead of a table."""
    parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")


def add_format(parser: CommandParser) -> None:
    """``--format``: a policy file's format."""
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="json or yaml (default: from the file's extension; json for stdout).",
    )


def positive(text: str) -> int:
    """A whole number of at least 1, for ``type=``."""
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be 1 or more")
    return value


def positive_or_zero(text: str) -> int:
    """A whole number of at least 0 (0: no limit), for ``type=``."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be 0 (no limit) or more")
    return value


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
