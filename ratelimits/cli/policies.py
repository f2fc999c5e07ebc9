"""``policies``, ``export`` and ``import``: the policy rows, listed and kept in files."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ratelimits import policy_io
from ratelimits.cli import output
from ratelimits.cli.prompt import confirm
from ratelimits.models import Policy

POLICY_COLUMNS = (
    "name",
    "endpoint",
    "methods",
    "algorithm",
    "rate",
    "key",
    "mode",
    "fail_open",
    "enabled",
)


def run_policies(command: BaseCommand, options: dict[str, Any]) -> None:
    policies = list(Policy.objects.order_by("name"))
    if options["json"]:
        rows = [
            {**{f: getattr(p, f) for f in policy_io.FIELDS}, "rate": p.rate_display}
            for p in policies
        ]
        command.stdout.write(output.as_json(rows))
        return
    if not policies:
        command.stdout.write("No policies. Add them in the admin or with `ratelimits import`.")
        return
    rows = [
        [
            p.name,
            p.endpoint,
            p.methods or "any",
            p.algorithm,
            p.rate_display,
            p.key,
            p.mode,
            "open" if p.fail_open else "closed",
            p.enabled,
        ]
        for p in policies
    ]
    command.stdout.write(output.table(POLICY_COLUMNS, rows))


def run_export(command: BaseCommand, options: dict[str, Any]) -> None:
    path = options["file"]
    fmt = _format(path, options["format"])
    policies = list(Policy.objects.order_by("name"))
    document = policy_io.dump_policies(policies, fmt)
    if path in (None, "-"):
        command.stdout.write(document, ending="")
        return
    try:
        Path(path).write_text(document, encoding="utf-8")
    except OSError as e:
        raise CommandError(f"Cannot write {path}: {e.strerror or e}.") from None
    command.stdout.write(f"Exported {len(policies)} policies to {path} ({fmt}).")


def run_import(command: BaseCommand, options: dict[str, Any]) -> None:
    path = options["file"]
    fmt = _format(path, options["format"])
    source = "stdin" if path == "-" else path
    try:
        content = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise CommandError(f"Cannot read {source}: {reason}.") from None
    try:
        rows = policy_io.parse_document(content, fmt, source)
        plan = policy_io.plan_import(rows, prune=options["prune"])
    except policy_io.PolicyFileError as e:
        raise CommandError(f"{source} was not imported; nothing changed.\n{e}") from None
    _report(command, plan, dry_run=options["dry_run"])
    if options["dry_run"]:
        command.stdout.write("Dry run: nothing changed.")
        return
    if not plan.changes:
        command.stdout.write("Nothing to change.")
        return
    if plan.pruned and not options["yes"]:
        names = ", ".join(p.name for p in plan.pruned)
        confirm(f"Delete {len(plan.pruned)} policies missing from {source} ({names})?")
    policy_io.apply_import(plan)
    command.stdout.write(
        f"Imported {source}: {len(plan.created)} created, {len(plan.updated)} updated, "
        f"{len(plan.unchanged)} unchanged, {len(plan.pruned)} deleted."
    )


def _report(command: BaseCommand, plan: policy_io.ImportPlan, *, dry_run: bool) -> None:
    would = "would be " if dry_run else ""
    for policy in plan.created:
        command.stdout.write(f"{would}created: {policy.name}")
    for policy, fields in plan.updated:
        command.stdout.write(f"{would}updated: {policy.name} ({', '.join(fields)})")
    for policy in plan.unchanged:
        command.stdout.write(f"unchanged: {policy.name}")
    for policy in plan.pruned:
        command.stdout.write(f"{would}deleted: {policy.name}")


def _format(path: str | None, explicit: str | None) -> str:
    try:
        return policy_io.detect_format(path, explicit)
    except policy_io.PolicyFileError as e:
        raise CommandError(str(e)) from None
