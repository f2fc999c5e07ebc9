"""``reset``: delete a policy's keys, all of them or one client's."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from ratelimits.cli import output
from ratelimits.cli.common import (
    find_policy,
    identity_option,
    ipv6_prefix_of,
    previous_identities_option,
)
from ratelimits.cli.prompt import confirm
from ratelimits.engine.store import connection
from ratelimits.tools import inventory


def run_reset(command: BaseCommand, options: dict[str, Any]) -> None:
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
    lifting = f", lifting {output.count(locks, 'lockout')}" if locks else ""
    if names and not as_json:
        command.stdout.write("\n".join(record["keys"]))
    if names and not options["dry_run"]:
        if not options["yes"]:
            confirm(f"Delete {output.count(len(names), 'key')} for {scope}?")
        record["deleted"] = inventory.delete(client, names)
    if as_json:
        command.stdout.write(output.as_json(record))
    elif not names:
        command.stdout.write(f"No keys for {scope}.")
    elif options["dry_run"]:
        command.stdout.write(
            f"Dry run: would delete {output.count(len(names), 'key')} for {scope}{lifting}."
        )
    else:
        command.stdout.write(
            f"Deleted {output.count(record['deleted'], 'key')} for {scope}{lifting}."
        )


def _policy_to_reset(name: str) -> str:
    """The policy whose keys ``reset`` deletes: a stored one, also one that does not
    compile on this machine (its keys are found by name)."""
    policies = inventory.known_policies()
    if name in policies.unusable:
        return name
    return find_policy(name, policies).name
