"""Asking before destructive work: yes/no on a terminal, refusal without one."""

from __future__ import annotations

import sys

from django.core.management.base import CommandError


def confirm(question: str) -> None:
    """Ask ``question``; return on yes, raise ``CommandError`` on anything else.

    Without a terminal on stdin there is nobody to ask: refuse and point to ``--yes``.
    The question goes to stderr, so that stdout holds only the results (``--json``).
    """
    if sys.stdin is None or not sys.stdin.isatty():
        raise CommandError(f"{question} Refusing without a terminal to confirm; pass --yes.")
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    try:
        answer = input()
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise CommandError("Cancelled; nothing changed.")
