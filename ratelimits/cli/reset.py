"""``reset``: delete a policy's keys, all of them or one client's; or one client's keys in
every policy that counts it (``--identity`` alone), lifting its locks."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ratelimits.cli import output
from ratelimits.cli.common import (
    find_policy,
    identity_option,
    ipv6_prefix_of,
    previous_identities_option,
)
from ratelimits.cli.prompt import confirm
from ratelimits.cli.subcommand import Subcommand, add_json
from ratelimits.engine.store import connection
from ratelimits.tools import inventory, lifting
from ratelimits.tools.identities import IDENTITY_FORMS


def run_reset(command: BaseCommand, options: dict[str, Any]) -> None:
    if options["policy"] is None:
        if options.get("identity") is None:
            raise CommandError("Name a --policy, an --identity, or both.")
        _reset_everywhere(command, options)
        return
    policy = _policy_to_reset(options["policy"])
    who = identity_option(options, ipv6_prefix_of(policy))
    client = connection.get_tool_client()
    # The client's keys, and those counted under its hash before a SECRET_KEY rotation.
    found = {
        name.key: name
        for identity in (who, *previous_identities_option(options))
        for name in inventory.scan(client, policy=policy, identity=identity)
    }
    names = sorted(found.values(), key=lambda n: n.key)
    scope = f"policy {policy}" + (f", identity {who}" if who else "")
    as_json = options["json"]
    locks = sum(1 for name in names if name.lock)
    record = {
        "policy": policy,
        "identity": who,
        "keys": [name.key for name in names],
        "lockouts": locks,
        "dry_run": options["dry_run"],
        "deleted": 0,
    }
    lifted = f", lifting {output.count(locks, 'lockout')}" if locks else ""
    if names and not as_json:
        command.stdout.write("\n".join(record["keys"]))
    if names and not options["dry_run"]:
        if not options["yes"]:
            confirm(f"Delete {output.count(len(names), 'key')} for {scope}?")
        asked = options.get("identity") or policy
        found = lifting.Found(asked, (who,) if who else (), tuple(names))
        record["deleted"] = lifting.lift(client, found, type(command))
    if as_json:
        command.stdout.write(output.as_json(record))
    elif not names:
        command.stdout.write(f"No keys for {scope}.")
    elif options["dry_run"]:
        command.stdout.write(
            f"Dry run: would delete {output.count(len(names), 'key')} for {scope}{lifted}."
        )
    else:
        command.stdout.write(
            f"Deleted {output.count(record['deleted'], 'key')} for {scope}{lifted}."
        )


def _policy_to_reset(name: str) -> str:
    """The policy whose keys ``reset`` deletes: a stored one, also one that does not
    compile on this machine (its keys are found by name)."""
    policies = inventory.known_policies()
    if name in policies.unusable:
        return name
    return find_policy(name, policies).name


def _reset_everywhere(command: BaseCommand, options: dict[str, Any]) -> None:
    """``reset --identity X``: X's keys in every policy, its pairs' too."""
    client = connection.get_tool_client()
    try:
        found = lifting.find(client, options["identity"])
    except ValueError as e:
        raise CommandError(f"--identity: {e}") from None
    scope = f"identity {', '.join(found.identities)}"
    locks = len(found.locks)
    lifting_text = f", lifting {output.count(locks, 'lockout')}" if locks else ""
    record = {
        "policy": None,
        "identity": found.asked,
        "identities": list(found.identities),
        "policies": found.policies,
        "keys": [name.key for name in found.names],
        "lockouts": locks,
        "dry_run": options["dry_run"],
        "deleted": 0,
    }
    count = output.count(len(found.names), "key")
    policies = len(found.policies)
    within = f" in {policies} {'policy' if policies == 1 else 'policies'}" if found.names else ""
    if found.names and not options["json"]:
        command.stdout.write("\n".join(record["keys"]))
    if found.names and not options["dry_run"]:
        if not options["yes"]:
            confirm(f"Delete {count}{within} for {scope}?")
        record["deleted"] = lifting.lift(client, found, type(command))
    if options["json"]:
        command.stdout.write(output.as_json(record))
    elif not found.names:
        command.stdout.write(f"No keys for {scope}.")
    elif options["dry_run"]:
        command.stdout.write(f"Dry run: would delete {count}{within} for {scope}{lifting_text}.")
    else:
        deleted = output.count(record["deleted"], "key")
        command.stdout.write(f"Deleted {deleted}{within} for {scope}{lifting_text}.")


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--policy",
        metavar="NAME",
        help="The policy. Without it, --identity's keys in every policy that counts it "
        "(alone or in a pair such as username+ip).",
    )
    parser.add_argument("--identity", metavar="VALUE", help=f"Only this client: {IDENTITY_FORMS}.")
    parser.add_argument("--dry-run", action="store_true", help="List the keys; delete nothing.")
    parser.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")
    add_json(parser)


SUBCOMMAND = Subcommand(
    "reset",
    "Delete a policy's keys (all, or one client's), or one client's keys in every policy, "
    "lifting its lockouts.",
    add_arguments,
    run_reset,
)
