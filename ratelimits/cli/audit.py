"""``audit-cleanup``: delete the sign-in records older than ``SIGN_IN_AUDIT_RETENTION`` days."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ratelimits.cli import output
from ratelimits.cli.subcommand import Subcommand, add_json
from ratelimits.conf import app_settings
from ratelimits.database import sign_in_records


def run_audit_cleanup(command: BaseCommand, options: dict[str, Any]) -> None:
    days = int(app_settings.SIGN_IN_AUDIT_RETENTION)
    found, cutoff = sign_in_records.cleanup(dry_run=options["dry_run"])
    record = {
        "retention_days": days,
        "before": cutoff.isoformat(timespec="seconds"),
        "dry_run": options["dry_run"],
        "deleted": 0 if options["dry_run"] else found,
        "found": found,
    }
    if options["json"]:
        command.stdout.write(output.as_json(record))
        return
    records = output.count(found, "sign-in record")
    kept = f"older than {days} days (before {record['before']})"
    if options["dry_run"]:
        command.stdout.write(f"Dry run: would delete {records} {kept}.")
    else:
        command.stdout.write(f"Deleted {records} {kept}.")


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--dry-run", action="store_true", help="Count the old records; delete nothing."
    )
    add_json(parser)


SUBCOMMAND = Subcommand(
    "audit-cleanup",
    "Delete the sign-in records older than SIGN_IN_AUDIT_RETENTION days.",
    add_arguments,
    run_audit_cleanup,
)
