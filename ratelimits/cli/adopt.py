"""``adopt``: the site's DRF throttles (and django-ratelimit decorators) as policies,
written like an import (validated, in one transaction, announced to every worker).

The plan is one line per policy (``-v 2`` adds the routes each replaces) and one per
throttle left alone, with the reason and its routes."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ratelimits.cli.common import file_format, write_document
from ratelimits.cli.subcommand import Subcommand, add_format
from ratelimits.contrib import django_ratelimit
from ratelimits.models import Policy
from ratelimits.tools import adoption, policy_files

#: The ``-v`` from which each policy's routes are listed.
ROUTES_VERBOSITY = 2


def django_ratelimit_rows(spec: Any) -> list[dict[str, Any]]:
    """The policy-file rows of a view's django-ratelimit spec."""
    return [dict(row) for row in django_ratelimit.policy_rows(spec)]


def run_adopt(command: BaseCommand, options: dict[str, Any]) -> None:
    mode, dry_run, output = options["mode"], options["dry_run"], options["output"]
    fmt = file_format(output, options["format"])
    found = adoption.plan_adoption(
        mode, spec_rows=django_ratelimit_rows, specs_of=django_ratelimit.specs_of
    )
    try:
        plan = policy_files.plan_import(found.rows)
        document = policy_files.dump_rows(found.rows, fmt)
    except policy_files.PolicyFileError as e:
        raise CommandError(f"The adopted policies do not validate; nothing changed.\n{e}") from None
    # With the file on stdout, the plan goes to stderr so that the file can be piped.
    report = command.stderr if output == "-" else command.stdout
    verbosity = options.get("adopt_verbosity")
    if verbosity is None:  # given before the subcommand, or not at all
        verbosity = options.get("verbosity", 1)
    routes = int(verbosity) >= ROUTES_VERBOSITY
    _report(report, found, plan, dry_run=dry_run, routes=routes)
    if dry_run:
        report.write("Dry run: nothing changed.")
    elif not plan.changes:
        report.write("Nothing to change.")
    else:
        policy_files.apply_import(plan)
        modes = mode or "each stored policy's mode kept, new ones in shadow"
        report.write(
            f"Adopted: {len(plan.created)} created, {len(plan.updated)} updated, "
            f"{len(plan.unchanged)} unchanged ({modes})."
        )
    if output is not None:
        if write_document(command, output, document):
            command.stdout.write(f"Wrote the plan as a policy file to {output}.")
    elif dry_run:
        command.stdout.write(f"\nThe same plan as a policy file ({fmt}; `import` accepts it):")
        command.stdout.write(document, ending="")


def _report(
    write_to: Any,
    found: adoption.AdoptionPlan,
    plan: policy_files.ImportPlan,
    *,
    dry_run: bool,
    routes: bool,
) -> None:
    """Each policy on one line (what happens to it, its rate, what it replaces; with
    ``routes``, each route it replaces below), the policies adopted earlier and kept, then
    each throttle left alone, why, and its routes."""
    would = "would be " if dry_run else ""
    verbs: dict[str, str] = {p.name: f"{would}created" for p in plan.created}
    verbs.update({p.name: f"{would}updated ({', '.join(f)})" for p, f in plan.updated})
    verbs.update({p.name: "unchanged" for p in plan.unchanged})
    if not found.adopted and not found.skipped and not found.kept:
        write_to.write("No DRF throttles or django-ratelimit decorators found in the URLconf.")
    for adopted in found.adopted:
        row = adopted.row
        write_to.write(f"{verbs[row['name']]}: {row['name']}: {_rate(row)}; {adopted.summary}")
        for replaced in adopted.replaces if routes else ():
            write_to.write(f"  replaces {replaced}")
    for name, mode in found.kept:
        write_to.write(
            f"kept: {name} ({mode}): adopted earlier; no DRF throttle of its is left in the "
            "URLconf (--mode enforce or --mode shadow sets its mode)"
        )
    for skipped in found.skipped:
        write_to.write(f"skipped: {skipped.what}: {skipped.why}")
        for label in skipped.views:
            write_to.write(f"  on {label}")


def _rate(row: dict[str, Any]) -> str:
    """``sliding_log, 100 per 3600 s per user_or_ip, endpoint /api/*, shadow`` (``cost 2``
    after the key when a request spends more than one)."""
    algorithm = row.get("algorithm") or Policy._meta.get_field("algorithm").get_default()
    key = row.get("key") or Policy._meta.get_field("key").get_default()
    cost = f", cost {row['cost']}" if (row.get("cost") or 1) > 1 else ""
    return (
        f"{algorithm}, {row.get('limit')} per {row.get('window')} s per {key}{cost}, "
        f"endpoint {row.get('endpoint')}, {row.get('mode')}"
    )


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--mode",
        choices=("shadow", "enforce"),
        default=None,
        help="shadow: the policies count and log, and let requests pass; enforce: they "
        "deny. Also sets the mode of the policies an earlier run adopted. Without it, "
        "a stored policy keeps its mode and a new one is in shadow.",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="Print the plan and the same plan as a policy file; write no policy.",
    )
    parser.add_argument(
        "--output",
        metavar="FILE",
        help="Also write the plan as a policy file that `import` accepts ('-' for stdout).",
    )
    parser.add_argument(
        "-v",
        "--verbosity",
        dest="adopt_verbosity",
        type=int,
        choices=(0, 1, 2, 3),
        default=None,
        help="1 (default): one line per policy; 2: each route it replaces too.",
    )
    add_format(parser)


SUBCOMMAND = Subcommand(
    "adopt", "Write policies doing what the site's DRF throttles do now.", add_arguments, run_adopt
)
