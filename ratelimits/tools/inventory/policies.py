"""The policies keys are read under: every stored one by name, and the check that reads one
key as the request path would for its client."""

from __future__ import annotations

from collections.abc import Sequence

from ratelimits.engine import limiter
from ratelimits.engine.keys import names as keys
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.models import Policy
from ratelimits.tools.applied_rules import Applied, applied, with_overrides


class KnownPolicies(dict[str, CompiledPolicy]):
    """Compiled policies by name; :attr:`unusable` names the stored ones that do not
    compile on this machine, with why (a time zone its database does not know)."""

    def __init__(self, policies: dict[str, CompiledPolicy], unusable: dict[str, str]) -> None:
        super().__init__(policies)
        self.unusable = unusable


def known_policies() -> KnownPolicies:
    """Every policy in the database by name, the disabled ones too (they may have keys),
    with their overrides; one that does not compile is left out, in ``unusable``."""
    compiled, unusable = [], {}
    for row in Policy.objects.all():
        try:
            compiled.append(CompiledPolicy.from_model(row))
        except ValueError as e:
            unusable[row.name] = str(e)
    return KnownPolicies({p.name: p for p in with_overrides(compiled)}, unusable)


def missing_policy_note(name: str, policies: dict[str, CompiledPolicy]) -> str:
    """Why a key's policy ``name`` is not among ``policies``: deleted, or not usable here."""
    reason = getattr(policies, "unusable", {}).get(name)
    return "policy deleted" if reason is None else f"the policy does not compile here: {reason}"


def policy_check(
    name: keys.KeyName, policies: dict[str, CompiledPolicy], previous: Sequence[str] = ()
) -> tuple[limiter.Check | None, Applied | None, str]:
    """The check that reads ``name`` as the request path would for its client (under the
    override that applies to it), what applies to the client, and why there is no check
    when there is none (an exempt client has no check and no note). ``previous``: the
    client's identity under each ``SECRET_KEY_FALLBACKS`` key (see :func:`applied`)."""
    policy = policies.get(name.policy)
    if policy is None:
        return None, None, missing_policy_note(name.policy, policies)
    if name.lock:  # a time, not counts: nothing to decide on
        return None, None, "" if policy.lockout else "left over: the policy has no lockout now"
    if policy.algorithm != name.algorithm:
        return None, None, f"left over: the policy now uses {policy.algorithm}"
    rule = applied(policy, name.identity, previous)
    if rule.policy is None:
        return None, rule, ""
    shards = rule.policy.shards  # an override's lower limit may leave fewer shards
    if (name.shard is None) != (shards == 1) or (name.shard or 0) >= shards:
        whose = f" under {rule.override}" if rule.override else ""
        return None, rule, f"left over: the policy now has {shards} shard(s){whose}"
    return limiter.Check(rule.policy, name.identity, name.shard or 0), rule, ""


def lock_to_read(name: keys.KeyName, policies: dict[str, CompiledPolicy]) -> str | None:
    """The lockout's key to read with ``name``: its own for a lockout's key, the one
    beside it for the counts' key of a policy with a lockout; else ``None``."""
    if name.lock:
        return name.key
    policy = policies.get(name.policy)
    if policy is None or not policy.lockout or policy.algorithm != name.algorithm:
        return None
    return keys.lock_key(name.key)
