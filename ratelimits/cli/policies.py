"""``policies``, ``export`` and ``import``: the policy rows, listed and kept in files."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count

from ratelimits.cli import output
from ratelimits.cli.common import file_format, write_document
from ratelimits.cli.prompt import confirm
from ratelimits.cli.subcommand import Subcommand, add_format, add_json
from ratelimits.models import Policy, PolicyOverride
from ratelimits.tools import policy_files
from ratelimits.tools.endpoints import EndpointIndex

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
    policies = list(Policy.objects.annotate(override_count=Count("overrides")).order_by("name"))
    index = EndpointIndex()  # the URLconf, read once for every policy
    if options["json"]:
        rows = []
        for p in policies:
            matches = index.matches(p.endpoint)
            rows.append(
                {
                    **{f: getattr(p, f) for f in policy_files.FIELDS},
                    "rate": p.rate_display,
                    "overrides": p.override_count,
                    "matches_nothing": not matches,
                    "nearest_match": None if matches else index.nearest(p.endpoint),
                }
            )
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
    columns = POLICY_COLUMNS
    if any(p.override_count for p in policies):  # like keys' note: only when it says something
        columns += ("overrides",)
        for row, policy in zip(rows, policies, strict=True):
            row.append(policy.override_count)
    problems = [index.problem(p.endpoint) for p in policies]
    if any(problems):  # a typo'd endpoint limits nothing: say so on its row
        columns += ("note",)
        for row, problem in zip(rows, problems, strict=True):
            row.append(problem or "")
    command.stdout.write(output.table(columns, rows, numeric=("overrides",)))


def run_export(command: BaseCommand, options: dict[str, Any]) -> None:
    path = options["file"]
    fmt = file_format(path, options["format"])
    policies = list(Policy.objects.order_by("name"))
    try:
        document = policy_files.dump_policies(policies, fmt)
    except policy_files.PolicyFileError as e:
        raise CommandError(f"Nothing exported: {e}") from None
    if not write_document(command, path, document):
        return
    overrides = sum(len(policy.overrides.all()) for policy in policies)  # prefetched
    counted = f" with {overrides} overrides" if overrides else ""
    command.stdout.write(f"Exported {len(policies)} policies{counted} to {path} ({fmt}).")


def run_import(command: BaseCommand, options: dict[str, Any]) -> None:
    path = options["file"]
    fmt = file_format(path, options["format"])
    source = "stdin" if path == "-" else path
    try:
        content = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise CommandError(f"Cannot read {source}: {reason}.") from None
    try:
        rows = policy_files.parse_document(content, fmt, source)
        plan = policy_files.plan_import(rows, prune=options["prune"])
    except policy_files.PolicyFileError as e:
        raise CommandError(f"{source} was not imported; nothing changed.\n{e}") from None
    as_json = options["json"]
    if not as_json:
        _report(command, plan, dry_run=options["dry_run"])
    applying = plan.changes and not options["dry_run"]
    if applying:
        if plan.pruned and not options["yes"]:
            names = ", ".join(p.name for p in plan.pruned)
            confirm(f"Delete {len(plan.pruned)} policies missing from {source} ({names})?")
        policy_files.apply_import(plan)
    if as_json:
        command.stdout.write(output.as_json(_plan_record(plan, source, applied=applying)))
        return
    if not applying:
        dry_run = options["dry_run"]
        command.stdout.write("Dry run: nothing changed." if dry_run else "Nothing to change.")
        return
    touched = plan.touched_by_overrides()
    summary = (
        f"Imported {source}: {len(plan.created)} created, "
        f"{len(plan.updated) + len(touched)} updated, "
        f"{len(plan.unchanged) - len(touched)} unchanged, {len(plan.pruned)} deleted"
    )
    created, updated, deleted = plan.override_counts()
    if created or updated or deleted:
        summary += f"; overrides: {created} created, {updated} updated, {deleted} deleted"
    command.stdout.write(summary + ".")


def _plan_record(plan: policy_files.ImportPlan, source: str, *, applied: bool) -> dict[str, Any]:
    """The import's report for ``--json``: every policy by what happens to it, and per
    policy the overrides created, updated (with the fields) and deleted, as files write
    them (users and groups by name, API keys only as hashes)."""
    overrides = {}
    for name, found in sorted(plan.overrides.items()):
        if not found.changes:
            continue
        overrides[name] = {
            "created": [policy_files.override_row(o) for o in found.created],
            "updated": [
                {**policy_files.override_row(o), "fields": fields} for o, fields in found.updated
            ],
            "deleted": [policy_files.override_row(o) for o in found.deleted],
        }
    touched = plan.touched_by_overrides()
    return {
        "source": source,
        "applied": applied,
        "created": [p.name for p in plan.created],
        "updated": [
            *({"name": p.name, "fields": fields} for p, fields in plan.updated),
            *({"name": p.name, "fields": []} for p in touched),
        ],
        "unchanged": [p.name for p in plan.unchanged if p not in touched],
        "deleted": [p.name for p in plan.pruned],
        "overrides": overrides,
    }


def _report(command: BaseCommand, plan: policy_files.ImportPlan, *, dry_run: bool) -> None:
    """One line per policy, then one per override it creates, updates or deletes."""
    would = "would be " if dry_run else ""
    write = command.stdout.write

    def policy_line(verb: str, policy: Policy, fields: list[str] | None = None) -> None:
        overrides = plan.override_changes(policy)
        notes = [", ".join(fields)] if fields else []
        if overrides is not None:
            notes.append(f"overrides: {overrides.summary()}")
            verb = verb if verb != "unchanged" else "updated"
        prefix = "" if verb == "unchanged" else would
        write(f"{prefix}{verb}: {policy.name}" + (f" ({'; '.join(notes)})" if notes else ""))
        if overrides is None:
            return
        for override in overrides.created:
            write(f"  {would}created: override {_override_text(override, policy)}")
        for override, changed in overrides.updated:
            text = _override_text(override, policy)
            write(f"  {would}updated: override {text} ({', '.join(changed)})")
        for override in overrides.deleted:
            write(f"  {would}deleted: override {_override_text(override, policy)}")

    for policy in plan.created:
        policy_line("created", policy)
    for policy, fields in plan.updated:
        policy_line("updated", policy, fields)
    # Policies whose overrides alone change come with the updated ones.
    for policy in sorted(plan.unchanged, key=lambda p: plan.override_changes(p) is None):
        policy_line("unchanged", policy)
    for policy in plan.pruned:
        policy_line("deleted", policy)


def _override_text(override: PolicyOverride, policy: Policy) -> str:
    """``user alice: 100 per 60 s``, ``API key (hashed 1a2b3c4d…): exempt``: who, and the
    rate at the policy's window as the file has it (never a secret: only hashes exist);
    for a concurrency policy ``3 at once, lease 60 s``."""
    return f"{override.target_display}: {override.rate_under(policy)}"


def add_policies_arguments(parser: CommandParser) -> None:
    add_json(parser)


def add_export_arguments(parser: CommandParser) -> None:
    parser.add_argument("file", nargs="?", metavar="FILE", help="Where to write (default stdout).")
    add_format(parser)


def add_import_arguments(parser: CommandParser) -> None:
    parser.add_argument("file", metavar="FILE", help="The file to read ('-' for stdin).")
    add_format(parser)
    parser.add_argument("--dry-run", action="store_true", help="Show the changes; make none.")
    parser.add_argument(
        "--prune", action="store_true", help="Also delete policies missing from the file."
    )
    parser.add_argument("--yes", action="store_true", help="Do not ask before pruning.")
    add_json(parser)


POLICIES = Subcommand("policies", "List every policy.", add_policies_arguments, run_policies)
EXPORT = Subcommand(
    "export", "Write every policy to a JSON or YAML file.", add_export_arguments, run_export
)
IMPORT = Subcommand(
    "import",
    "Create or update policies from a JSON or YAML file.",
    add_import_arguments,
    run_import,
)
