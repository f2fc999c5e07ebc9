"""``keys``: the limiter's keys in Redis (SCAN), with their counts."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ratelimits.cli import output, records
from ratelimits.cli.common import find_policy, identity_option, ipv6_prefix_of
from ratelimits.cli.identities import identity_label, usernames_of
from ratelimits.cli.subcommand import Subcommand, add_json, positive_or_zero
from ratelimits.engine.keys import names as keys
from ratelimits.engine.store import connection
from ratelimits.tools import inspection, inventory
from ratelimits.tools.applied_rules import Applied
from ratelimits.tools.identities import IDENTITY_FORMS

KEY_COLUMNS = (
    "key",
    "policy",
    "identity",
    "algorithm",
    "count",
    "limit",
    "remaining",
    "ttl",
    "memory",
)
NUMERIC = ("count", "limit", "remaining", "ttl", "memory")


def run_keys(command: BaseCommand, options: dict[str, Any]) -> None:
    policies = inventory.known_policies()
    if options["policy"] is not None:
        find_policy(options["policy"], policies)
    if options["identity"] is not None and options["match"] is not None:
        raise CommandError("Give --identity or --match, not both.")
    # A bad --identity is refused before Redis is asked.
    who = identity_option(options, ipv6_prefix_of(options["policy"], policies))
    limit = options["limit"] or None
    client = connection.get_tool_client()
    progress = output.ProgressLine(command.stderr, total=inventory.key_count(client))
    names = inventory.scan(
        client,
        policy=options["policy"],
        identity=who,
        identity_glob=options["match"],
        limit=limit,
        progress=progress,
    )
    found = sorted(inventory.usage(client, names, policies), key=lambda u: u.name.key)
    progress.done()
    usernames = usernames_of(u.name.identity for u in found)
    if options["json"]:
        command.stdout.write(output.as_json([records.usage_record(u, usernames) for u in found]))
        return
    rows = [
        [
            u.name.key,
            u.name.policy,
            identity_label(u.name.identity, usernames)
            + ("" if u.name.shard is None else f" [shard {u.name.shard}]"),
            u.name.algorithm or keys.LOCK_SUFFIX,
            u.count,
            u.limit,
            u.remaining,
            output.seconds(u.ttl),
            u.memory,
            _override_label(u.rule) or "-",
            "; ".join(filter(None, [u.note, _lockout_note(u)])),
        ]
        for u in found
    ]
    # Like check's override column and the note column: only when a row has one.
    headers = KEY_COLUMNS
    if any(_override_label(u.rule) for u in found):
        headers += ("override",)
    else:
        rows = [row[:-2] + row[-1:] for row in rows]
    if any(row[-1] for row in rows):
        headers += ("note",)
    else:
        rows = [row[:-1] for row in rows]
    if rows:
        command.stdout.write(output.table(headers, rows, numeric=NUMERIC))
    total = sum(u.memory or 0 for u in found)
    unknown = sum(1 for u in found if u.memory is None)
    if found and unknown == len(found):
        size = "memory unknown (MEMORY USAGE refused)"
    elif unknown:
        size = f"{total:,} bytes, and memory unknown for {unknown} (MEMORY USAGE refused)"
    else:
        size = f"{total:,} bytes"
    summary = f"{output.count(len(found), 'key')}, {size}."
    if limit is not None and len(found) >= limit:
        summary += f" Stopped at --limit {limit}; there may be more (--limit 0 for all)."
    command.stdout.write(summary)


def _lockout_note(u: inventory.KeyUsage) -> str:
    """A key's word on its client's lockout: when a lockout's key ends it, and that a
    counts' key's client is locked out."""
    if u.lockout is None:
        return "lockout over" if u.name.lock else ""
    if u.name.lock:
        return f"lockout until {inspection.iso(u.lockout.until_us)}"
    return f"locked out, {output.seconds(u.lockout.left)} left"


def _override_label(rule: Applied | None) -> str:
    """The override column's cell: ``user bob``, ``exempt (group staff)``; "" for none."""
    return rule.label if rule else ""


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("--policy", metavar="NAME", help="Only this policy's keys.")
    parser.add_argument("--identity", metavar="VALUE", help=f"Only this client: {IDENTITY_FORMS}.")
    parser.add_argument(
        "--match",
        metavar="GLOB",
        help="Only identities matching this Redis glob, e.g. 'ip:203.0.113.*'.",
    )
    parser.add_argument(
        "--limit",
        type=positive_or_zero,
        default=1000,
        metavar="N",
        help="Stop after N keys without scanning the rest (default 1000; 0 for all).",
    )
    add_json(parser)


SUBCOMMAND = Subcommand("keys", "List live keys (SCAN) with their counts.", add_arguments, run_keys)
