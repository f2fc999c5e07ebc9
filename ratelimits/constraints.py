"""Internal, not part of the public API (see docs/api.md).

The database constraints of the policy models: what a row must hold whichever way it
is written (the admin, the ORM, an import, SQL)."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from ratelimits import validators
from ratelimits.choices import AlgorithmChoice, Calendar, Counts, Mode
from ratelimits.engine import algorithms
from ratelimits.engine.keys import kinds
from ratelimits.engine.policy import override_identity, rules


def one_of(field: str, values: tuple[str, ...]) -> dict[str, object]:
    """The lookup of ``field`` being one of ``values``: ``field=value`` for one."""
    return {field: values[0]} if len(values) == 1 else {f"{field}__in": values}


def none_of(field: str, values: tuple[str, ...]) -> Q:
    """``field`` being none of ``values``: ``~Q(field=value)`` for one."""
    return ~Q(**one_of(field, values))


#: ``Policy.Meta.constraints``.
POLICY_CONSTRAINTS = [
    models.CheckConstraint(
        condition=Q(name__regex=validators.NAME_PATTERN), name="ratelimits_policy_name_slug"
    ),
    models.CheckConstraint(
        condition=Q(endpoint__regex=validators.ENDPOINT_PATTERN),
        name="ratelimits_policy_endpoint_not_blank",
    ),
    models.CheckConstraint(
        condition=Q(methods__regex=validators.METHODS_PATTERN),
        name="ratelimits_policy_methods_valid",
    ),
    models.CheckConstraint(
        condition=Q(algorithm__in=AlgorithmChoice.values),
        name="ratelimits_policy_algorithm_valid",
    ),
    models.CheckConstraint(condition=Q(limit__gte=1), name="ratelimits_policy_limit_gte_1"),
    models.CheckConstraint(
        condition=Q(limit__lte=validators.MAX_LIMIT), name="ratelimits_policy_limit_max"
    ),
    models.CheckConstraint(
        condition=Q(window__gte=1, window__lte=validators.MAX_WINDOW),
        name="ratelimits_policy_window_range",
    ),
    models.CheckConstraint(
        condition=Q(key__regex=kinds.KEY_PATTERN) & ~Q(key__regex=kinds.SAME_KIND_TWICE),
        name="ratelimits_policy_key_valid",
    ),
    models.CheckConstraint(condition=Q(mode__in=Mode.values), name="ratelimits_policy_mode_valid"),
    models.CheckConstraint(
        condition=Q(shards__gte=1, shards__lte=validators.MAX_SHARDS) & Q(shards__lte=F("limit")),
        name="ratelimits_policy_shards_range",
    ),
    models.CheckConstraint(
        condition=Q(burst__isnull=True)
        | Q(
            burst__gte=1,
            burst__lte=validators.MAX_LIMIT,
            **one_of("algorithm", algorithms.BURSTING),
        ),
        name="ratelimits_policy_burst_range",
    ),
    models.CheckConstraint(
        condition=Q(cost__gte=1, cost__lte=validators.MAX_LIMIT),
        name="ratelimits_policy_cost_range",
    ),
    models.CheckConstraint(
        condition=Q(counts__in=Counts.values)
        & (Q(counts=Counts.ALL) | none_of("algorithm", algorithms.RELEASED)),
        name="ratelimits_policy_counts_valid",
    ),
    models.CheckConstraint(
        condition=Q(calendar=Calendar.ROLLING, time_zone="")
        | Q(calendar__in=Calendar.values, algorithm__in=algorithms.CALENDAR)
        & ~Q(calendar=Calendar.ROLLING),
        name="ratelimits_policy_calendar_valid",
    ),
    models.CheckConstraint(
        condition=Q(lockout=0)
        | Q(lockout__gte=1, lockout__lte=validators.MAX_LOCKOUT, shards=rules.LOCKOUT_SHARDS)
        & none_of("algorithm", algorithms.RELEASED),
        name="ratelimits_policy_lockout_valid",
    ),
    models.CheckConstraint(
        condition=Q(lockout=0) | ~Q(key__in=kinds.SHARED_KEYS),
        name="ratelimits_policy_no_global_lockout",
    ),
    models.CheckConstraint(
        condition=Q(lockout_until_lifted=False)
        | Q(lockout=0, shards=rules.LOCKOUT_SHARDS)
        & none_of("algorithm", algorithms.RELEASED)
        & ~Q(key__in=kinds.SHARED_KEYS),
        name="ratelimits_policy_until_lifted_valid",
    ),
    models.CheckConstraint(
        condition=Q(extend_lockout=False) | Q(lockout__gte=1, lockout_until_lifted=False),
        name="ratelimits_policy_extend_lockout_valid",
    ),
    models.CheckConstraint(
        condition=Q(reset_on_success=False)
        | Q(counts=Counts.SIGN_IN_FAILURES, key__regex=kinds.SIGN_IN_ONLY_KEYS),
        name="ratelimits_policy_reset_on_success_valid",
    ),
    models.CheckConstraint(
        condition=~Q(key__regex=kinds.SIGN_IN_ONLY_KEYS) | Q(counts=Counts.SIGN_IN_FAILURES),
        name="ratelimits_policy_username_sign_in",
    ),
    models.CheckConstraint(
        condition=~Q(counts=Counts.SIGN_IN_FAILURES) | ~Q(key__regex=kinds.NOT_FOR_SIGN_IN_KEYS),
        name="ratelimits_policy_sign_in_key",
    ),
    models.CheckConstraint(
        condition=Q(ipv6_prefix__isnull=True)
        | Q(
            ipv6_prefix__gte=validators.MIN_IPV6_PREFIX,
            ipv6_prefix__lte=validators.MAX_IPV6_PREFIX,
        ),
        name="ratelimits_policy_ipv6_prefix_range",
    ),
]

#: ``PolicyOverride.Meta.constraints``.
OVERRIDE_CONSTRAINTS = [
    models.CheckConstraint(
        condition=(
            Q(user__isnull=False, group__isnull=True, identity="")
            | Q(user__isnull=True, group__isnull=False, identity="")
            | (Q(user__isnull=True, group__isnull=True) & ~Q(identity=""))
        ),
        name="ratelimits_override_one_target",
    ),
    models.CheckConstraint(
        condition=Q(exempt=True, limit__isnull=True)
        | Q(exempt=False, limit__gte=0, limit__lte=validators.MAX_LIMIT),
        name="ratelimits_override_limit_or_exempt",
    ),
    models.CheckConstraint(
        condition=Q(identity__regex=override_identity.STORED_PATTERN),
        name="ratelimits_override_identity_stored_form",
    ),
    models.UniqueConstraint(
        fields=["policy", "user"],
        condition=Q(user__isnull=False),
        name="ratelimits_override_unique_user",
    ),
    models.UniqueConstraint(
        fields=["policy", "group"],
        condition=Q(group__isnull=False),
        name="ratelimits_override_unique_group",
    ),
    models.UniqueConstraint(
        fields=["policy", "identity"],
        condition=~Q(identity=""),
        name="ratelimits_override_unique_identity",
    ),
]
