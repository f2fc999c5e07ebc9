"""The policy changelist's bulk actions: enable, disable, switch the mode, reset the
counters; and the reset they share with the change page's reset button."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

import ratelimits.admin.live_usage as live_usage
from ratelimits.admin.forms import field_label
from ratelimits.engine.store import connection, errors
from ratelimits.exceptions import ConfigurationError
from ratelimits.models import Policy


@admin.action(description="Enable the selected policies", permissions=["change"])
def enable(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
    _bulk_set(modeladmin, request, queryset, "Enabled", enabled=True)


@admin.action(description="Disable the selected policies", permissions=["change"])
def disable(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
    _bulk_set(modeladmin, request, queryset, "Disabled", enabled=False)


@admin.action(description="Switch to shadow mode (log, do not deny)", permissions=["change"])
def switch_to_shadow(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Policy]
) -> None:
    _bulk_set(modeladmin, request, queryset, "Switched to shadow mode", mode="shadow")


@admin.action(description="Switch to enforce mode", permissions=["change"])
def switch_to_enforce(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Policy]
) -> None:
    _bulk_set(modeladmin, request, queryset, "Switched to enforce mode", mode="enforce")


@admin.action(description="Reset the counters of the selected policies", permissions=["reset"])
def reset_counters(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Policy]
) -> None:
    total = lifted = 0
    for policy in queryset:
        removed = reset_policy(modeladmin, request, policy)
        if removed is None:
            return
        total += removed[0]
        lifted += removed[1]
    modeladmin.message_user(request, f"Deleted {total} keys{lifting(lifted)}.", messages.SUCCESS)


def _bulk_set(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet[Policy],
    verb: str,
    **values: Any,
) -> None:
    field, value = next(iter(values.items()))
    label = field_label(field)
    targets = [p for p in queryset if getattr(p, field) != value]
    if targets:
        Policy.objects.filter(pk__in=[p.pk for p in targets]).update(**values)
    for policy in targets:
        setattr(policy, field, value)
        modeladmin.log_change(request, policy, [{"changed": {"fields": [label]}}])
    names = ", ".join(p.name for p in targets) or "none needed it"
    modeladmin.message_user(request, f"{verb}: {names}.", messages.SUCCESS)


def reset_policy(
    modeladmin: admin.ModelAdmin, request: HttpRequest, policy: Policy, who: str | None = None
) -> tuple[int, int] | None:
    """Delete the policy's keys (``who``'s only): ``(keys deleted, lockouts lifted)``,
    or ``None`` when Redis did not answer (said in a message)."""
    try:
        removed = live_usage.reset_counters(policy.name, who, type(modeladmin), request.user)
    except (*connection.REDIS_ERRORS, ConfigurationError) as e:
        modeladmin.message_user(
            request, f"Redis {errors.what_went_wrong(e)}; nothing reset ({e}).", messages.ERROR
        )
        return None
    scope = f" of {who}" if who else ""
    deleted, lifted = removed
    modeladmin.log_change(
        request, policy, f"Reset counters{scope} ({deleted} keys{lifting(lifted)})."
    )
    return removed


def lifting(lockouts: int) -> str:
    """``", 1 lockout lifted"``; "" for none."""
    if not lockouts:
        return ""
    return f", {lockouts} lockout{'' if lockouts == 1 else 's'} lifted"
