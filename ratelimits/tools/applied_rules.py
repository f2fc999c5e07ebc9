"""Which limit applies to the client a key counts: overrides as the request path applies them.

On the request path :func:`ratelimits.http.request_facts.checks_for` hands the request's user and
identity to :meth:`~ratelimits.engine.policy.compiled.CompiledPolicy.for_client`. A tool reading a
key has only the key's identity, which says who the client is: ``u:<pk>`` (or ``u#<hash>``)
a user, whose user override and groups' overrides apply as on the request path; ``ip:…``
an address, which address and network overrides and ``EXEMPT_NETWORKS`` match; ``h:…`` a
hashed API key. :func:`applied` asks the engine's own rule lookup
(:meth:`~ratelimits.engine.policy.compiled.CompiledPolicy.rule_for`) on policies whose overrides
are compiled by the code that compiles the policy table's
(:func:`ratelimits.database.policy_source.with_overrides`).

A key counted by address or API key does not say which user sent its requests: on a
policy keyed so, a user's or a group's override applies request by request, and a tool
shows the rule the key's identity gets.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ratelimits.database.policy_source import with_overrides as attach_overrides
from ratelimits.engine.keys.exemptions import is_exempt_address
from ratelimits.engine.keys.identity import user_identity
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.policy.overrides import Exemption
from ratelimits.models import Policy

#: ``override`` of a client that ``EXEMPT_NETWORKS`` exempts from every policy.
EXEMPT_NETWORKS = "EXEMPT_NETWORKS"


@dataclass(frozen=True, slots=True)
class Applied:
    """What applies to one client under one policy.

    ``policy`` is the policy as applied to the client (with its override's limit), or
    ``None`` when the client is exempt. ``override`` names the rule that applied, as
    ``ratelimits check`` does ("user bob", "group partners", "203.0.113.0/24",
    "API key (hashed 8bd12428…)", or :data:`EXEMPT_NETWORKS`); "" when none did."""

    policy: CompiledPolicy | None
    override: str = ""

    @property
    def exempt(self) -> bool:
        return self.policy is None

    @property
    def label(self) -> str:
        """The rule as the tools show it: ``user bob``, ``exempt (group staff)``; "" for
        none."""
        return f"exempt ({self.override})" if self.exempt else self.override


def applied(policy: CompiledPolicy, identity: str, previous: Sequence[str] = ()) -> Applied:
    """What applies to the client counted as ``identity`` under ``policy`` (a policy with
    its overrides attached: :func:`with_overrides`). ``previous``: the client's identity
    under each ``SECRET_KEY_FALLBACKS`` key, when the tool has its secret
    (:func:`ratelimits.tools.identities.previous_identities`), so an override hashed
    before a key rotation applies as on the request path."""
    if identity.startswith("ip:") and is_exempt_address(identity[3:]):
        return Applied(None, EXEMPT_NETWORKS)
    rule = policy.rule_for(user_key_of(policy, identity), identity, lambda: previous)
    if isinstance(rule, Exemption):
        return Applied(None, rule.override)
    return Applied(rule, rule.override)


def user_key_of(policy: CompiledPolicy, identity: str) -> str | None:
    """The user a key's ``identity`` counts, as the request path's override lookup names
    users (``str(pk)``), or ``None`` when it counts no user.

    A pk that identities hash (``u#<hash>``) is found among the users ``policy``'s
    overrides name, directly or by a group: only those can get a user's rule."""
    if identity.startswith("u:"):
        return identity[2:]
    overrides = policy.overrides
    if not identity.startswith("u#") or overrides is None:
        return None
    named = set(overrides.users).union(*(members for members, _ in overrides.groups))
    return next((pk for pk in named if user_identity(pk) == identity), None)


def with_overrides(policies: Iterable[CompiledPolicy]) -> list[CompiledPolicy]:
    """``policies`` (compiled from their rows) with their overrides attached, read from
    the database as the policy table reads them; one that is no longer stored stays as
    it is."""
    policies = list(policies)
    names = [policy.name for policy in policies]
    ids = dict(Policy.objects.filter(name__in=names).values_list("name", "pk"))
    stored = attach_overrides([policy for policy in policies if policy.name in ids], ids)
    by_name = {policy.name: policy for policy in stored}
    return [by_name.get(policy.name, policy) for policy in policies]
