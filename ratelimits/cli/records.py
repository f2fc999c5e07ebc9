"""What ``--json`` prints: a key (``keys``), a key's full state (``inspect``) and a request's
place in each policy it meets (``check``). A decision reads the same in each of them
(:func:`decision_record`)."""

from __future__ import annotations

from typing import Any

from ratelimits.engine import algorithms
from ratelimits.engine.decision import Decision, Verdict
from ratelimits.engine.keys import kinds
from ratelimits.engine.keys import names as keys
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.tools import inspection, inventory, key_timing
from ratelimits.tools.applied_rules import Applied


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


def lockout_record(name: keys.KeyName, lockout: key_timing.Lockout | None) -> dict[str, Any]:
    """Whether the key is a lockout's, and the client's lockout (``null``: none now)."""
    return {
        "lock": name.lock,
        "locked_until": inspection.iso(lockout.until_us) if lockout else None,
        "locked_for": lockout.left if lockout else None,
    }


def reset_record(reset: key_timing.NextReset | None) -> dict[str, Any] | None:
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
        **decision_record(d.decision),
        **rule_record(d.rule),
        **lockout_record(d.name, d.lockout),
        "next_reset": reset_record(d.next_reset),
    }
    if d.rule is not None and d.rule.exempt:
        record.update(exempt_record(d.policy.window if d.policy else None))
    if d.name.lock:
        return record
    if inspection.is_log(d.name.algorithm):
        record["entries"] = [
            {"time": inspection.iso(at), "age": (d.now_us - at) / 1_000_000} for at in d.entries
        ]
    elif algorithms.released(d.name.algorithm):
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
    return override_record(rule.override if rule else None, exempt=bool(rule and rule.exempt))


def override_record(override: str | None, *, exempt: bool = False) -> dict[str, Any]:
    """The override that applied (``None``: none did) and whether it exempts the client."""
    return {"override": override or None, "exempt": exempt}


def decision_record(decision: Decision | None) -> dict[str, Any]:
    """What the policy would answer for one more request now: the limit that applies, the
    window, the count, what is left, whether it is allowed and when to retry; ``None`` for
    each without a decision (the policy is gone, the key is left over or a lockout's)."""
    return {
        "limit": decision.limit if decision else None,
        "window": decision.window if decision else None,
        "count": decision.count if decision else None,
        "remaining": decision.available if decision else None,
        "allowed": decision.allowed if decision else None,
        "retry_after": decision.retry_after if decision else None,
    }


def exempt_record(window: int | None) -> dict[str, Any]:
    """The decision of an exempt client: let through, uncounted, under no limit, as the
    request path does."""
    return {**decision_record(None), "window": window, "allowed": True}


def check_record(
    request: dict[str, Any],
    verdict: Verdict,
    overrides: list[str],
    exempt: list[tuple[CompiledPolicy, str, str]],
    skipped: list[tuple[CompiledPolicy, str]],
) -> dict[str, Any]:
    """``check --json``: the ``request`` (method, path, url name, scope), whether the next
    one would be allowed, and one entry per policy: each counted one's decision (with the
    override that set its limit, from ``overrides``, one per decision), each exempt one
    (with the rule that exempts it), each skipped one and why."""
    return {
        **request,
        "allowed": verdict.allowed,
        "retry_after": verdict.retry_after,
        "policies": [
            {
                "policy": d.policy,
                "identity": d.identity,
                "enforce": d.enforce,
                **decision_record(d),
                **override_record(override),
            }
            for d, override in zip(verdict.decisions, overrides, strict=True)
        ]
        + [
            {
                "policy": policy.name,
                "identity": who,
                "enforce": policy.enforce,
                **exempt_record(policy.window),
                **override_record(rule, exempt=True),
            }
            for policy, who, rule in exempt
        ]
        + [{"policy": p.name, "identity": None, "skipped": why} for p, why in skipped],
    }


def identity_record(tag: str, usernames: dict[str, str]) -> dict[str, Any]:
    """The client: its identity, what kind it is, whether hashed, and the user's name."""
    return {
        "identity": tag,
        "identity_kind": kinds.describe(tag),
        "hashed": kinds.is_hashed(tag),
        "username": usernames.get(tag),
    }
