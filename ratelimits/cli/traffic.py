"""``traffic``: how far a policy's clients went per window, what another limit would have
denied, and the suggested limit (the admin's Traffic panel, for a terminal or a script)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ratelimits.cli import output
from ratelimits.cli.common import find_policy
from ratelimits.cli.subcommand import Subcommand, add_json, positive
from ratelimits.engine.store import connection
from ratelimits.tools import inventory
from ratelimits.tools.traffic import traffic_report
from ratelimits.tools.traffic.estimate import HEADROOM, SUGGESTION_SHARE


def run_traffic(command: BaseCommand, options: dict[str, Any]) -> None:
    policy = find_policy(options["policy"], inventory.known_policies())
    client = connection.get_tool_client()
    try:
        report = traffic_report(client, policy, options["since"], options["what_if"])
    except ValueError as e:
        raise CommandError(str(e)) from None
    if options["json"]:
        command.stdout.write(output.as_json(report))
        return
    write = command.stdout.write
    mode = report["mode"]
    write(
        f"policy {report['policy']}: {report['algorithm']}, {report['limit']} per "
        f"{report['window']} s per client, {mode}; the last {report['since']}"
    )
    if not report["recording"]:
        write("(its traffic record is off: the policy's `traffic` field)")
    write(
        f"{report['requests']:,} requests, {report['denied']:,} denied; "
        f"{report['clients']:,} clients (per window)"
    )
    if not report["clients"]:
        write("Nothing recorded in this span.")
        return
    rows = [
        (
            f"{level['at_least']:,}",
            f"{level['clients']:,}",
            "<- the limit" if _limit_row(level["at_least"], report) else "",
        )
        for level in report["levels"]
    ]
    write("")
    write(output.table(("use reached", "clients", ""), rows, numeric=("use reached", "clients")))
    what_if = report["what_if"]
    if what_if is not None:
        low, high = what_if["clients_denied_bounds"]
        r_low, r_high = what_if["requests_denied_bounds"]
        share = what_if["requests_denied"] / report["requests"] if report["requests"] else 0.0
        write("")
        write(
            f"A limit of {what_if['limit']:,} would have denied about "
            f"{what_if['clients_denied']:,} clients ({low:,} to {high:,}) and about "
            f"{what_if['requests_denied']:,} requests ({r_low:,} to {r_high:,}), "
            f"{share:.1%} of them."
        )
        if not what_if["observed"]:
            write("(past the current limit the record cannot see how far clients went)")
    if report["suggested_limit"] is not None:
        write(
            f"Suggested limit: {report['suggested_limit']:,} ({SUGGESTION_SHARE:.0%} of the "
            f"clients stayed under {report['stayed_under']:,}; times {HEADROOM}, rounded up "
            "to a level)."
        )


def _limit_row(level: int, report: dict[str, Any]) -> bool:
    """True for the level row the current limit falls in."""
    levels = [entry["at_least"] for entry in report["levels"]]
    below = [k for k in levels if k <= report["limit"]]
    return bool(below) and level == below[-1]


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("policy", metavar="POLICY", help="The policy's name.")
    parser.add_argument(
        "--since",
        default="24h",
        metavar="SPAN",
        help="The span read: 1h, 24h (default) or 7d, or any number of hours or days up to 7d.",
    )
    parser.add_argument(
        "--what-if",
        dest="what_if",
        type=positive,
        metavar="N",
        help="What a limit of N would have denied (default: the suggested limit).",
    )
    add_json(parser)


SUBCOMMAND = Subcommand(
    "traffic",
    "How far a policy's clients went per window, what another limit would have denied, and "
    "a suggested limit (from its traffic record).",
    add_arguments,
    run_traffic,
)
