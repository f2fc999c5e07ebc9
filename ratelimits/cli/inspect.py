"""``inspect``: one key's full state, read without consuming."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ratelimits.cli import output, records
from ratelimits.cli.common import find_policy, parse_identity, previous_identities_option
from ratelimits.cli.identities import identity_label, usernames_of
from ratelimits.cli.subcommand import Subcommand, add_json
from ratelimits.conf import app_settings
from ratelimits.engine import algorithms
from ratelimits.engine.keys import kinds
from ratelimits.engine.keys import names as keys
from ratelimits.engine.store import connection
from ratelimits.tools import inspection, inventory
from ratelimits.tools.applied_rules import applied
from ratelimits.tools.identities import IDENTITY_FORMS

#: What a key's last part may be, as the refusal of a bad KEY lists them.
_SUFFIXES = "|".join([*keys.ALGORITHM_SUFFIX.values(), keys.LOCK_SUFFIX])


def run_inspect(command: BaseCommand, options: dict[str, Any]) -> None:
    policies = inventory.known_policies()
    name = _key_to_inspect(options, policies)
    client = connection.get_tool_client()
    detail = inspection.inspect(client, name, policies, previous_identities_option(options))
    usernames = usernames_of([name.identity])
    if options["json"]:
        command.stdout.write(output.as_json(records.detail_record(detail, usernames)))
        return
    write = command.stdout.write
    policy = detail.policy
    write(f"key        {name.key}{'' if detail.exists else '  (not in Redis: nothing counted)'}")
    if policy is None:
        write(f"policy     {name.policy} (deleted)")
    else:
        mode = "enforce" if policy.enforce else "shadow"
        write(f"policy     {policy.name}: {policy.algorithm}, {policy.rate_display}, {mode}")
    rule = detail.rule
    if rule is not None and rule.exempt:
        write(f"override   {rule.label}: not counted")
    elif rule is not None and rule.policy is not None and rule.override:
        write(f"override   {rule.override}: {rule.policy.rate_display}")
    kind = kinds.describe(name.identity)
    write(f"identity   {identity_label(name.identity, usernames)}, {kind}")
    write(f"now        {inspection.iso(detail.now_us)} (Redis TIME)")
    write(f"ttl        {output.seconds(detail.ttl)}")
    if detail.memory is None and detail.exists:  # a key that is there has a size
        write("memory     unknown (MEMORY USAGE refused)")
    else:
        write(f"memory     {output.text(detail.memory)} bytes")
    if detail.note:
        write(f"note       {detail.note}")
    decision = detail.decision
    if decision is not None:
        write(f"count      {output.text(decision.count)} of {decision.limit}")
        if decision.allowed:
            write(f"next       allowed; {decision.available} left now")
        else:
            write(f"next       denied; retry in {output.seconds(decision.retry_after)}")
    elif rule is not None and rule.exempt:
        write("next       allowed; exempt, not counted")
    if detail.lockout is not None:
        lockout = detail.lockout
        write(
            f"locked     until {inspection.iso(lockout.until_us)}, "
            f"{output.seconds(lockout.left)} left"
        )
    elif name.lock:
        write("locked     no: the lockout is over")
    if detail.next_reset is not None:
        reset = detail.next_reset
        write(f"resets     {reset.local_text}, in {output.seconds(reset.left)}")
    if name.lock:
        if policy is not None:
            write(f"counts     {keys.counts_name(name, policy.algorithm).key}")
        return
    if inspection.is_log(name.algorithm):
        _write_entries(command, detail)
    elif algorithms.released(name.algorithm):
        _write_leases(command, detail)
    elif detail.windows:
        rows = [
            [w.label, inspection.iso(w.start_us), inspection.iso(w.end_us), w.count]
            for w in detail.windows
        ]
        write(output.table(("window", "start", "end", "count"), rows, numeric=("count",)))
    elif detail.raw:
        write(f"stored     {detail.raw}")


def _key_to_inspect(options: dict[str, Any], policies: dict[str, Any]) -> keys.KeyName:
    key = options["key"]
    if key is not None:
        if options["policy"] is not None or options["identity"] is not None:
            raise CommandError("Give a KEY or --policy and --identity, not both.")
        name = keys.parse_key(key, app_settings.KEY_PREFIX)
        if name is None:
            raise CommandError(
                f"{key!r} is not a ratelimits key: expected "
                f"{app_settings.KEY_PREFIX}:{{<identity>}}:<policy>:<{_SUFFIXES}>."
            )
        return name
    if options["policy"] is None or options["identity"] is None:
        raise CommandError("Give a KEY, or both --policy and --identity.")
    policy = find_policy(options["policy"], policies)
    who = parse_identity(options["identity"], policy.ipv6_prefix)
    # The client's key under the limit that applies to it (an override's may leave a
    # sharded policy fewer shards, or none).
    key = (applied(policy, who, previous_identities_option(options)).policy or policy).key_for(who)
    parsed = keys.parse_key(key, app_settings.KEY_PREFIX)
    assert parsed is not None
    return parsed


def _write_entries(command: BaseCommand, detail: inspection.KeyDetail) -> None:
    window_us = detail.policy.window * 1_000_000 if detail.policy else None
    rows = []
    for number, at in enumerate(detail.entries, start=1):
        age_us = detail.now_us - at
        state = "" if window_us is None or age_us < window_us else "left the window"
        rows.append([number, inspection.iso(at), output.seconds(age_us / 1_000_000), state])
    command.stdout.write(f"entries    {len(rows)}")
    if rows:
        command.stdout.write(output.table(("#", "time", "age", ""), rows, numeric=("#", "age")))


def _write_leases(command: BaseCommand, detail: inspection.KeyDetail) -> None:
    """One row per lease, oldest first: when it started, its age, when it ends."""
    now_us, rows = detail.now_us, []
    for number, lease in enumerate(detail.leases, start=1):
        ended = lease.ended(now_us)
        rows.append(
            [
                number,
                inspection.iso(lease.start_us),
                output.seconds(lease.age(now_us)),
                None if ended else output.seconds(lease.ends_in(now_us)),
                "ended" if ended else "",
            ]
        )
    live = sum(1 for lease in detail.leases if not lease.ended(now_us))
    ended_count = len(rows) - live
    command.stdout.write(
        f"leases     {live} in progress" + (f", {ended_count} ended" if ended_count else "")
    )
    if rows:
        headers = ("#", "started", "age", "ends in", "")
        command.stdout.write(output.table(headers, rows, numeric=("#", "age", "ends in")))


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("key", nargs="?", metavar="KEY", help="The key, as `keys` lists it.")
    parser.add_argument("--policy", metavar="NAME", help="The policy (with --identity).")
    parser.add_argument("--identity", metavar="VALUE", help=f"The client: {IDENTITY_FORMS}.")
    add_json(parser)


SUBCOMMAND = Subcommand(
    "inspect", "Show one key's full state without consuming.", add_arguments, run_inspect
)
