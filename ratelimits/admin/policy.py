"""The policy admin: list and edit live, bulk actions (:mod:`~.actions`), a live-usage panel
with resets. Its forms are in :mod:`~.forms`, the override rows in :mod:`~.overrides`, the
changelist's filter and columns in :mod:`~.changelist`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from ratelimits.admin.actions import (
    disable,
    enable,
    lifting,
    reset_counters,
    reset_policy,
    switch_to_enforce,
    switch_to_shadow,
)
from ratelimits.admin.changelist import KeyKindFilter, denied_column, endpoint_column
from ratelimits.admin.forms import PolicyChangelistForm, PolicyForm
from ratelimits.admin.live_usage import policy_usage
from ratelimits.admin.overrides import PolicyOverrideInline
from ratelimits.admin.traffic import traffic_panel, try_in_shadow
from ratelimits.admin.widgets import memory_estimate
from ratelimits.engine import algorithms
from ratelimits.models import Policy
from ratelimits.tools.endpoints import UNMATCHED, EndpointIndex
from ratelimits.tools.identities import identity_from_text

RESET_PERMISSION = "ratelimits.reset_counters"


def _hide_override_identities(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``sensitive_post_parameters`` for the override rows' ``identity`` fields (an API key
    typed in ``overrides-0-identity``, ...), whose names depend on the rows posted: Django's
    error reports (``DEBUG`` pages, the admins' e-mails) show them as stars."""

    @functools.wraps(view)
    def hiding(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        names = [name for name in request.POST if name.endswith("-identity")]
        if not names:
            return view(request, *args, **kwargs)
        return sensitive_post_parameters(*names)(view)(request, *args, **kwargs)

    return hiding


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
    form = PolicyForm
    inlines = (PolicyOverrideInline,)
    list_display = (
        "name",
        "endpoint",
        "methods_display",
        "algorithm",
        "rate",
        "limit",
        "window",
        "key",
        "mode",
        "enabled",
    )
    list_editable = ("limit", "window", "mode", "enabled")
    list_filter = ("algorithm", "calendar", "counts", "mode", "enabled", KeyKindFilter)
    search_fields = ("name", "endpoint")
    readonly_fields = ("memory_per_client", "created_at", "updated_at")
    actions = (enable, disable, switch_to_shadow, switch_to_enforce, reset_counters)
    fieldsets = (
        (None, {"fields": ("name", "enabled", "mode")}),
        (
            "What it matches",
            {
                "fields": ("endpoint", "methods"),
                "description": "A URL name, a DRF throttle_scope, or a path glob such as "
                "/api/payment/*.",
            },
        ),
        (
            "The limit",
            {
                "fields": (
                    "algorithm",
                    "limit",
                    "window",
                    "calendar",
                    "time_zone",
                    "burst",
                    "cost",
                    "counts",
                    "lockout",
                    "lockout_until_lifted",
                    "extend_lockout",
                    "reset_on_success",
                    "memory_per_client",
                    "key",
                    "ipv6_prefix",
                    "fail_open",
                    "shards",
                    "traffic",
                )
            },
        ),
        ("History", {"fields": ("created_at", "updated_at"), "classes": ("collapse",)}),
    )

    class Media:
        js = ("ratelimits/policy_form.js",)

    # -- changelist --------------------------------------------------------------------

    def get_changelist_form(self, request: HttpRequest, **kwargs: Any) -> type[forms.ModelForm]:
        return super().get_changelist_form(request, form=PolicyChangelistForm, **kwargs)

    def get_list_display(self, request: HttpRequest) -> list[Any]:
        # Django asks twice per page (columns, then sortable_by): read Redis and the
        # URLconf once, and give the same columns both times.
        columns = getattr(request, "_ratelimits_columns", None)
        if columns is None:
            columns = (endpoint_column(_urlconf(request)), denied_column())
            request._ratelimits_columns = columns  # type: ignore[attr-defined]
        endpoint, denied = columns
        shown = super().get_list_display(request)
        return [*(endpoint if name == "endpoint" else name for name in shown), denied]

    @admin.display(description="methods", ordering="methods")
    def methods_display(self, obj: Policy) -> str:
        return obj.methods or "all"

    @admin.display(description="rate")
    def rate(self, obj: Policy) -> str:
        return obj.rate_display

    @admin.display(description="Redis memory per active client")
    def memory_per_client(self, obj: Policy) -> str:
        return memory_estimate(
            obj.algorithm or algorithms.DEFAULT, obj.limit, obj.calendar, obj.lockout or 0
        )

    # -- saving ------------------------------------------------------------------------

    def save_model(self, request: HttpRequest, obj: Policy, form: Any, change: bool) -> None:
        """Save, then warn when the endpoint matches nothing in the URLconf: a typo that
        limits nothing (a scope a view sets only at run time is not seen, so the policy is
        saved all the same). Only the add and change forms: the changelist's rows cannot
        change the endpoint."""
        super().save_model(request, obj, form, change)
        if "endpoint" not in form.fields:
            return
        index = EndpointIndex(_urlconf(request))
        if index.matches(obj.endpoint):
            return
        nearest = index.nearest(obj.endpoint)
        hint = f" Did you mean “{nearest}”?" if nearest else ""
        self.message_user(
            request,
            f"The endpoint “{obj.endpoint}” {UNMATCHED} in this site's URLconf, so the "
            f"policy “{obj.name}” limits no request (unless a view sets that scope at run "
            f"time, which is not seen here).{hint}",
            messages.WARNING,
        )

    # -- actions (in actions.py) ---------------------------------------------------------

    def has_reset_permission(self, request: HttpRequest) -> bool:
        """The ``reset`` permission that the reset action and the reset view ask for."""
        return request.user.has_perm(RESET_PERMISSION)

    # -- live usage and the reset view --------------------------------------------------

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(require_POST(self.reset_view))
        trying = self.admin_site.admin_view(require_POST(self.try_in_shadow_view))
        return [
            path("<path:object_id>/reset-counters/", view, name="ratelimits_policy_reset"),
            path("<path:object_id>/try-in-shadow/", trying, name="ratelimits_policy_try_in_shadow"),
            *super().get_urls(),
        ]

    @method_decorator(_hide_override_identities)
    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The add and change pages, whose override rows post API keys: their
        ``identity`` values are left out of error reports."""
        return super().changeform_view(request, object_id, form_url, extra_context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = dict(extra_context or {})
        policy = self.get_object(request, object_id)
        if policy is not None and self.has_view_or_change_permission(request, policy):
            context["live_usage"] = policy_usage(policy)
            context["can_reset"] = self.has_reset_permission(request)
            context["reset_url"] = reverse(
                f"{self.admin_site.name}:ratelimits_policy_reset", args=[policy.pk]
            )
            context["traffic"] = traffic_panel(policy, request.GET.dict())
            context["can_try_in_shadow"] = self._may_try_in_shadow(request, policy)
            context["try_in_shadow_url"] = reverse(
                f"{self.admin_site.name}:ratelimits_policy_try_in_shadow", args=[policy.pk]
            )
        return super().change_view(request, object_id, form_url, context)

    @method_decorator(sensitive_post_parameters("identity"))
    def reset_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST: delete the policy's keys, or one client's (``identity``: maybe an API key,
        kept out of error reports)."""
        if not self.has_reset_permission(request):
            raise PermissionDenied
        # get_object() answers None for a pk that is not a number (a 500 from the ORM).
        policy = self.get_object(request, unquote(object_id))
        if policy is None:
            raise Http404("No such rate limit policy.")
        who = request.POST.get("identity") or None
        if who is not None:
            try:
                who = identity_from_text(who, policy.ipv6_prefix)
            except ValueError as e:
                self.message_user(request, str(e), messages.ERROR)
                return HttpResponseRedirect(self._change_url(policy))
        removed = reset_policy(self, request, policy, who)
        if removed is not None:
            scope = f" of {who}" if who else ""
            deleted, lifted = removed
            self.message_user(
                request,
                f"Reset the counters{scope}: {deleted} keys deleted{lifting(lifted)}.",
                messages.SUCCESS,
            )
        return HttpResponseRedirect(self._change_url(policy))

    def _may_try_in_shadow(self, request: HttpRequest, policy: Policy) -> bool:
        """Change permission on the policy; and add permission when trying an enforcing
        policy's limit makes its shadow twin."""
        if not self.has_change_permission(request, policy):
            return False
        return policy.mode == "shadow" or self.has_add_permission(request)

    def try_in_shadow_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST ``limit``: put it to the test in shadow mode (:func:`try_in_shadow`), logged
        in the admin history of the policy that takes it."""
        policy = self.get_object(request, unquote(object_id))
        if policy is None:
            raise Http404("No such rate limit policy.")
        if not self._may_try_in_shadow(request, policy):
            raise PermissionDenied
        text = request.POST.get("limit", "").strip()
        try:
            limit = int(text)
            shadow, created = try_in_shadow(policy, limit)
        except (ValueError, ValidationError) as e:
            reason = "; ".join(e.messages) if isinstance(e, ValidationError) else ""
            self.message_user(
                request,
                f"Cannot try “{text}” in shadow: a limit is a whole number, 1 or more. {reason}",
                messages.ERROR,
            )
            return HttpResponseRedirect(self._change_url(policy))
        message = (
            f"Trying the limit {limit} in shadow mode (from the Traffic panel of {policy.name})."
        )
        if created:
            self.log_addition(request, shadow, [{"added": {}}])
        self.log_change(request, shadow, message)
        self.message_user(
            request,
            f"The shadow policy “{shadow.name}” now counts with a limit of {limit}: its "
            "traffic panel and the dashboard show what it would deny; nothing is denied.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(self._change_url(shadow))

    def _change_url(self, policy: Policy) -> str:
        return reverse(f"{self.admin_site.name}:ratelimits_policy_change", args=[policy.pk])


def _urlconf(request: HttpRequest) -> str | None:
    """The URLconf this request was resolved with (a middleware may set its own)."""
    return getattr(request, "urlconf", None)
