"""What ``--json`` prints of a key, a key's full state and a client's place in a policy."""

from __future__ import annotations

from typing import Any

from ratelimits.engine import identity, keys
from ratelimits.tools import inspection, inventory, timing
from ratelimits.tools.applied import Applied


def usage_record(u: inventory.KeyUsage, usernames: dict[str, str]) -> dict[str, Any]:
    """One key of ``keys --json``."""
    return {
        "key": u.name.key,
        "policy": u.name.policy,
        **identity_record(u.name.identity, usernames),
        "shard": u.name.shard,
        "algorithm": u.name.algorithm or None,
        "count": u.count,
        "limit": u.limit,
        "window": u.policy.window if u.policy else None,
        "remaining": u.remaining,
        **rule_record(u.rule),
        "ttl": u.ttl,
        "memory": u.memory,
        "note": u.note,
        **lockout_record(u.name, u.lockout),
    }


def lockout_record(name: keys.KeyName, lockout: timing.Lockout | None) -> dict[str, Any]:
    """Whether the key is a lockout's, and the client's lockout (``null``: none now)."""
    return {
        "lock": name.lock,
        "locked_until": inspection.iso(lockout.until_us) if lockout else None,
        "locked_for": lockout.left if lockout else None,
    }


def reset_record(reset: timing.NextReset | None) -> dict[str, Any] | None:
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


def detail_record(d: inspection.KeyDetail, usernames: dict[str, str]) -> dict[str, Any]:
    """``inspect --json``: one key's full state."""
    decision = d.decision
    record: dict[str, Any] = {
        "key": d.name.key,
        "exists": d.exists,
        "policy": d.name.policy,
        **identity_record(d.name.identity, usernames),
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
        **rule_record(d.rule),
        **lockout_record(d.name, d.lockout),
        "next_reset": reset_record(d.next_reset),
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


def rule_record(rule: Applied | None) -> dict[str, Any]:
    """Which override applied to the client (``None``: none did), and whether it exempts
    it, as ``check --json`` says it."""
    return {
        "override": (rule.override or None) if rule else None,
        "exempt": rule.exempt if rule else False,
    }


def identity_record(tag: str, usernames: dict[str, str]) -> dict[str, Any]:
    """The client: its identity, what kind it is, whether hashed, and the user's name."""
    return {
        "identity": tag,
        "identity_kind": identity.describe(tag),
        "hashed": identity.is_hashed(tag),
        "username": usernames.get(tag),
    }
