"""``keys``, ``inspect`` and ``reset``: the limiter's keys in Redis."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from ratelimits.cli import output
from ratelimits.cli.common import find_policy, parse_identity
from ratelimits.cli.prompt import confirm
from ratelimits.conf import app_settings
from ratelimits.engine import identity, keys
from ratelimits.engine.store import connection
from ratelimits.tools import inspection, inventory, timing
from ratelimits.tools.applied import Applied, applied
from ratelimits.tools.identities import previous_identities

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
#: What a key's last part may be, as the refusal of a bad KEY lists them.
_SUFFIXES = "|".join([*keys.ALGORITHM_SUFFIX.values(), keys.LOCK_SUFFIX])


def run_keys(command: BaseCommand, options: dict[str, Any]) -> None:
    policies = inventory.known_policies()
    if options["policy"] is not None:
        find_policy(options["policy"], policies)
    if options["identity"] is not None and options["match"] is not None:
        raise CommandError("Give --identity or --match, not both.")
    # A bad --identity is refused before Redis is asked.
    who = _identity(options, _ipv6_prefix(options["policy"], policies))
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
    usernames = _usernames(u.name.identity for u in found)
    if options["json"]:
        command.stdout.write(output.as_json([_usage_record(u, usernames) for u in found]))
        return
    rows = [
        [
            u.name.key,
            u.name.policy,
            _identity_label(u.name.identity, usernames)
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
    summary = f"{_count_keys(len(found))}, {size}."
    if limit is not None and len(found) >= limit:
        summary += f" Stopped at --limit {limit}; there may be more (--limit 0 for all)."
    command.stdout.write(summary)


def run_inspect(command: BaseCommand, options: dict[str, Any]) -> None:
    policies = inventory.known_policies()
    name = _key_to_inspect(options, policies)
    client = connection.get_tool_client()
    detail = inspection.inspect(client, name, policies, _previous(options))
    usernames = _usernames([name.identity])
    if options["json"]:
        command.stdout.write(output.as_json(_detail_record(detail, usernames)))
        return
    write = command.stdout.write
    policy = detail.policy
    write(f"key        {name.key}{'' if detail.exists else '  (not in Redis: nothing counted)'}")
    if policy is None:
        write(f"policy     {name.policy} (deleted)")
    else:
        mode = "enforce" if policy.enforce else "shadow"
        write(f"policy     {policy.name}: {policy.algorithm}, {policy.rate}, {mode}")
    rule = detail.rule
    if rule is not None and rule.exempt:
        write(f"override   {rule.label}: not counted")
    elif rule is not None and rule.policy is not None and rule.override:
        write(f"override   {rule.override}: {rule.policy.rate}")
    kind = identity.describe(name.identity)
    write(f"identity   {_identity_label(name.identity, usernames)}, {kind}")
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
    elif name.algorithm == "concurrency":
        _write_leases(command, detail)
    elif detail.windows:
        rows = [
            [w.label, inspection.iso(w.start_us), inspection.iso(w.end_us), w.count]
            for w in detail.windows
        ]
        write(output.table(("window", "start", "end", "count"), rows, numeric=("count",)))
    elif detail.raw:
        write(f"stored     {detail.raw}")


def run_reset(command: BaseCommand, options: dict[str, Any]) -> None:
    policy = _policy_to_reset(options["policy"])
    who = _identity(options, _ipv6_prefix(policy))
    client = connection.get_tool_client()
    # The client's keys, and those counted under its hash before a SECRET_KEY rotation.
    found = {
        name.key: name
        for identity in (who, *_previous(options))
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
    lifting = f", lifting {_count(locks, 'lockout')}" if locks else ""
    if names and not as_json:
        command.stdout.write("\n".join(record["keys"]))
    if names and not options["dry_run"]:
        if not options["yes"]:
            confirm(f"Delete {_count_keys(len(names))} for {scope}?")
        record["deleted"] = inventory.delete(client, names)
    if as_json:
        command.stdout.write(output.as_json(record))
    elif not names:
        command.stdout.write(f"No keys for {scope}.")
    elif options["dry_run"]:
        command.stdout.write(
            f"Dry run: would delete {_count_keys(len(names))} for {scope}{lifting}."
        )
    else:
        command.stdout.write(f"Deleted {_count_keys(record['deleted'])} for {scope}{lifting}.")


def _policy_to_reset(name: str) -> str:
    """The policy whose keys ``reset`` deletes: a stored one, also one that does not
    compile on this machine (its keys are found by name)."""
    policies = inventory.known_policies()
    if name in policies.unusable:
        return name
    return find_policy(name, policies).name


def _count_keys(number: int) -> str:
    return _count(number, "key")


def _count(number: int, noun: str) -> str:
    return f"1 {noun}" if number == 1 else f"{number:,} {noun}s"


def _lockout_note(u: inventory.KeyUsage) -> str:
    """A key's word on its client's lockout: when a lockout's key ends it, and that a
    counts' key's client is locked out."""
    if u.lockout is None:
        return "lockout over" if u.name.lock else ""
    if u.name.lock:
        return f"lockout until {inspection.iso(u.lockout.until_us)}"
    return f"locked out, {output.seconds(u.lockout.left)} left"


def _identity(options: dict[str, Any], ipv6_prefix: int | None = None) -> str | None:
    text = options.get("identity")
    return None if text is None else parse_identity(text, ipv6_prefix)


def _ipv6_prefix(name: str | None, policies: dict[str, Any] | None = None) -> int | None:
    """The prefix the policy ``name`` groups IPv6 clients by (``None``: ``IPV6_PREFIX``)."""
    if name is None:
        return None
    policy = (inventory.known_policies() if policies is None else policies).get(name)
    return None if policy is None else policy.ipv6_prefix


def _previous(options: dict[str, Any]) -> tuple[str, ...]:
    """The ``--identity``'s secret hashed under each ``SECRET_KEY_FALLBACKS`` key (an API
    key, an API client; empty for other forms): an override stored before a rotation
    matches one, and the client's keys counted before it are named by one."""
    text = options.get("identity")
    return () if text is None else previous_identities(text)


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
    key = (applied(policy, who, _previous(options)).policy or policy).key_for(who)
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


def _usage_record(u: inventory.KeyUsage, usernames: dict[str, str]) -> dict[str, Any]:
    return {
        "key": u.name.key,
        "policy": u.name.policy,
        **_identity_record(u.name.identity, usernames),
        "shard": u.name.shard,
        "algorithm": u.name.algorithm or None,
        "count": u.count,
        "limit": u.limit,
        "window": u.policy.window if u.policy else None,
        "remaining": u.remaining,
        **_rule_record(u.rule),
        "ttl": u.ttl,
        "memory": u.memory,
        "note": u.note,
        **_lockout_record(u.name, u.lockout),
    }


def _lockout_record(name: keys.KeyName, lockout: timing.Lockout | None) -> dict[str, Any]:
    """Whether the key is a lockout's, and the client's lockout (``null``: none now)."""
    return {
        "lock": name.lock,
        "locked_until": inspection.iso(lockout.until_us) if lockout else None,
        "locked_for": lockout.left if lockout else None,
    }


def _reset_record(reset: timing.NextReset | None) -> dict[str, Any] | None:
    """When a calendar policy's counts next reset: the instant (UTC), the local time of
    its zone and the seconds left; ``None`` for a rolling window."""
    if reset is None:
        return None
    return {
        "at": inspection.iso(reset.at_us),
        "local": reset.local.isoformat(),
        "time_zone": reset.time_zone,
        "left": reset.left,
    }


def _detail_record(d: inspection.KeyDetail, usernames: dict[str, str]) -> dict[str, Any]:
    decision = d.decision
    record: dict[str, Any] = {
        "key": d.name.key,
        "exists": d.exists,
        "policy": d.name.policy,
        **_identity_record(d.name.identity, usernames),
        "shard": d.name.shard,
        "algorithm": d.name.algorithm or None,
        "now": inspection.iso(d.now_us),
        "ttl": d.ttl,
        "memory": d.memory,
        "note": d.note,
        "limit": decision.limit if decision else None,
        "window": decision.window if decision else None,
        "count": decision.count if decision else None,
        "remaining": decision.available if decision else None,
        "allowed": decision.allowed if decision else None,
        "retry_after": decision.retry_after if decision else None,
        **_rule_record(d.rule),
        **_lockout_record(d.name, d.lockout),
        "next_reset": _reset_record(d.next_reset),
    }
    if d.rule is not None and d.rule.exempt:  # the request path lets it through, uncounted
        record["window"] = d.policy.window if d.policy else None
        record["allowed"] = True
    if d.name.lock:
        return record
    if inspection.is_log(d.name.algorithm):
        record["entries"] = [
            {"time": inspection.iso(at), "age": (d.now_us - at) / 1_000_000} for at in d.entries
        ]
    elif d.name.algorithm == "concurrency":
        record["leases"] = [
            {
                "started": inspection.iso(lease.start_us),
                "age": lease.age(d.now_us),
                "ends": inspection.iso(lease.end_us),
                "ends_in": lease.ends_in(d.now_us),
                "ended": lease.ended(d.now_us),
            }
            for lease in d.leases
        ]
    else:
        record["windows"] = [
            {
                "label": w.label,
                "start": inspection.iso(w.start_us),
                "end": inspection.iso(w.end_us),
                "count": w.count,
            }
            for w in d.windows
        ]
        record["stored"] = d.raw
    return record


def _rule_record(rule: Applied | None) -> dict[str, Any]:
    """Which override applied to the client (``None``: none did), and whether it exempts
    it, as ``check --json`` says it."""
    return {
        "override": (rule.override or None) if rule else None,
        "exempt": rule.exempt if rule else False,
    }


def _override_label(rule: Applied | None) -> str:
    """The override column's cell: ``user bob``, ``exempt (group staff)``; "" for none."""
    return rule.label if rule else ""


def _identity_record(tag: str, usernames: dict[str, str]) -> dict[str, Any]:
    return {
        "identity": tag,
        "identity_kind": identity.describe(tag),
        "hashed": identity.is_hashed(tag),
        "username": usernames.get(tag),
    }


def _identity_label(tag: str, usernames: dict[str, str]) -> str:
    if identity.is_hashed(tag):
        return f"{tag} (hashed)"
    if tag in usernames:
        return f"{tag} ({usernames[tag]})"
    return tag


def _usernames(tags: Any) -> dict[str, str]:
    """``{"u:42": "alice"}`` for the user identities that name an existing user."""
    pks = {tag.removeprefix("u:") for tag in tags if tag.startswith("u:")}
    if not pks:
        return {}
    model = get_user_model()
    try:
        users = list(model._default_manager.filter(pk__in=pks))
    except (ValueError, TypeError, ValidationError):
        return {}
    return {f"u:{user.pk}": user.get_username() for user in users}
