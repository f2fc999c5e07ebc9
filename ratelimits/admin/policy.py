"""The policy admin: list and edit live, bulk actions, a live-usage panel with resets."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import path, reverse
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.utils.text import capfirst
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from ratelimits.admin.usage import policy_usage, reset_counters
from ratelimits.admin.widgets import EndpointInput, memory_estimate
from ratelimits.engine import override_identity
from ratelimits.engine.periods import NOMINAL_WINDOW
from ratelimits.engine.stats import denied_since
from ratelimits.engine.store import connection, errors
from ratelimits.exceptions import ConfigurationError
from ratelimits.models import Counts, Mode, Policy, PolicyOverride
from ratelimits.tools.endpoints import UNMATCHED, EndpointIndex
from ratelimits.tools.identities import identity_from_text

RESET_PERMISSION = "ratelimits.reset_counters"
DENIED_WINDOW_MINUTES = 5


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


class KeyKindFilter(admin.SimpleListFilter):
    """Who a policy counts: user, ip, user_or_ip, global, username, or any header."""

    title = "key"
    parameter_name = "key_kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("user", "user"),
            ("ip", "ip"),
            ("user_or_ip", "user or ip"),
            ("global", "global"),
            ("username", "attempted username"),
            ("header", "a header"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Policy]) -> QuerySet[Policy]:
        value = self.value()
        if value == "header":
            return queryset.filter(key__startswith="header:")
        if value:
            return queryset.filter(key=value)
        return queryset


class BlankIsZero(forms.IntegerField):
    """A whole number that may be left blank for 0 (``lockout``: none)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{**kwargs, "required": False})

    def to_python(self, value: Any) -> int:
        number: int | None = super().to_python(value)
        return 0 if number is None else number


class FailModeSelect(forms.NullBooleanSelect):
    """The add form's ``fail_open``: automatic (blank), open or closed. A checkbox's "on"
    (a script that posts the form as it was) still means open."""

    def __init__(self, attrs: Any = None) -> None:
        super().__init__(attrs)
        self.choices = [
            ("unknown", "Automatic: closed for a policy against guessing, else open"),
            ("true", "Fail open: let requests through"),
            ("false", "Fail closed: deny them"),
        ]

    def value_from_datadict(self, data: Any, files: Any, name: str) -> bool | None:
        if data.get(name) == "on":
            return True
        return super().value_from_datadict(data, files, name)  # type: ignore[no-any-return]


#: ``fail_open``'s help on the add form, where it may be left to the policy's kind.
FAIL_MODE_HELP = (
    "When Redis cannot answer. Automatic: a policy against guessing (it counts failures or "
    "failed sign-ins, or has a lockout) fails closed, denying requests, so that making Redis "
    "unavailable cannot buy an attacker unlimited guesses; any other fails open, letting "
    "requests through. Choose open or closed to decide yourself; the change form shows "
    "what was saved."
)


def guards_against_guessing(counts: Any, lockout: Any) -> bool:
    """True for a policy against brute force: one that counts failures or failed
    sign-ins, or locks a client out; such a policy should fail closed."""
    return counts in (Counts.FAILURES, Counts.SIGN_IN_FAILURES) or bool(lockout)


class PolicyForm(forms.ModelForm):
    class Meta:
        model = Policy
        fields = "__all__"
        widgets = {"endpoint": EndpointInput()}
        field_classes = {"lockout": BlankIsZero}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "fail_open" in self.fields and self.instance.pk is None:
            # A new policy's fail mode may follow its kind (see clean()).
            self.fields["fail_open"] = forms.NullBooleanField(
                required=False,
                widget=FailModeSelect,
                label=self.fields["fail_open"].label,
                help_text=FAIL_MODE_HELP,
            )
            if "fail_open" not in (kwargs.get("initial") or {}):
                self.initial["fail_open"] = None  # automatic, not the model's default
        if "window" in self.fields:  # a calendar period sets it (Policy.normalize)
            self.fields["window"].required = False
        if "key" in self.fields:  # a client mints header values: say what caps them
            self.fields["key"].help_text += (
                " Without such a gateway, add an ip policy on the same endpoint: a request "
                "it denies spends nothing here, so minted values cannot pass its limit."
            )
        if "calendar" in self.fields:  # policy_form.js fills a period's window in
            self.fields["calendar"].widget.attrs["data-windows"] = json.dumps(NOMINAL_WINDOW)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if (
            "window" in self.fields
            and cleaned.get("window") is None
            and not cleaned.get("calendar")
            and "window" not in self.errors
        ):
            self.add_error("window", "Give the window in seconds, or choose a calendar period.")
        if "fail_open" in self.fields and cleaned.get("fail_open") is None:
            counts = cleaned.get("counts", Counts.ALL)
            cleaned["fail_open"] = not guards_against_guessing(counts, cleaned.get("lockout"))
        return cleaned


class PolicyChangelistForm(forms.ModelForm):
    """The changelist's editable row: the mode by its short name, so the select does not
    take a third of the table (the long labels push the last columns out of sight)."""

    mode = forms.ChoiceField(
        choices=[(m.value, m.value) for m in Mode],
        label=capfirst(Policy._meta.get_field("mode").verbose_name),  # as the history logs it
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A calendar period sets the window (Policy.normalize): an edit would be lost.
        if "window" in self.fields and self.instance.calendar:
            self.fields["window"].disabled = True
            self.fields["window"].help_text = "Set by the calendar period."


class PolicyOverrideForm(forms.ModelForm):
    """One override row. A stored identity is shown as ``describe()`` writes it (an API
    key as ``API key (hashed …)``, never a secret: only its hash is stored); left as shown
    it keeps the stored value, anything typed is normalised (an API key hashed) with the
    policy's key as the form now holds it."""

    class Meta:
        model = PolicyOverride
        fields = ("user", "group", "identity", "limit", "exempt", "comment")
        widgets = {
            # A typed API key is not offered back by the browser's form history.
            "identity": forms.TextInput(
                attrs={"autocomplete": "off", "spellcheck": "false", "size": 28}
            ),
            "comment": forms.TextInput(attrs={"size": 30}),
        }
        help_texts = {
            "identity": (
                "An IP address or network (203.0.113.7, 10.0.0.0/8); for a policy keyed "
                "by header:NAME an API key; for one keyed by user or user_or_ip an API "
                "client that authenticates as something other than a user, as "
                "auth:<its name> (auth:key-one). Keys are stored hashed and shown as "
                '"API key (hashed …)" or "API client (hashed …)": leave it as shown to '
                "keep it."
            ),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stored = self.instance.identity if self.instance.pk is not None else ""
        if stored:
            self.initial["identity"] = override_identity.describe(stored)

    def clean_identity(self) -> str:
        value: str = (self.cleaned_data.get("identity") or "").strip()
        stored = self.instance.identity if self.instance.pk is not None else ""
        if stored and value == override_identity.describe(stored):
            return stored
        return value

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        # The formset puts the policy being edited under its foreign key: on the add page
        # it has no pk yet, and the model's own clean() cannot normalise without one.
        policy = cleaned.get("policy")
        value = cleaned.get("identity")
        if value and isinstance(policy, Policy) and "identity" not in self.errors:
            try:
                cleaned["identity"] = override_identity.normalize(value, policy.key or "")
            except ValueError as e:
                self.add_error("identity", str(e))
        return cleaned

    def validate_constraints(self) -> None:
        # Django 6.0+ checks an inline row's constraints on its policy here, against the
        # stored rows: it would refuse a client whose row is deleted in the same save.
        # Whether a client is named twice is the formset's to say (as Django 5.2 leaves
        # it); the other constraints are checked as before.
        exclude = self._get_validation_exclusions() | {"policy"}
        try:
            self.instance.validate_constraints(exclude=exclude)
        except ValidationError as e:
            self._update_errors(e)

    def _post_clean(self) -> None:
        super()._post_clean()
        # A user, group or identity refused above never reaches the instance, so the model
        # adds "Name exactly one ..." and its constraint "... is violated" on top of the
        # field's own error; and the model's sentence makes the constraint's redundant.
        found = self._errors.get(NON_FIELD_ERRORS) if self._errors else None
        if not found:
            return
        noise = {_ONE_TARGET_VIOLATED}
        if any(name in self._errors for name in ("user", "group", "identity")):
            noise.add(_ONE_TARGET)
        elif _ONE_TARGET not in found:
            return
        kept = [message for message in found if message not in noise]
        if kept:
            self._errors[NON_FIELD_ERRORS] = self.error_class(kept, error_class="nonfield")
        else:
            del self._errors[NON_FIELD_ERRORS]


_ONE_TARGET = "Name exactly one of a user, a group or an identity."  # PolicyOverride.clean
_ONE_TARGET_VIOLATED = next(
    constraint.get_violation_error_message()
    for constraint in PolicyOverride._meta.constraints
    if constraint.name == "ratelimits_override_one_target"
)


class PolicyOverrideFormSet(forms.BaseInlineFormSet):
    """Refuses two rows naming the same client, before the database does: two rows the
    save writes, or one and a stored row it keeps as it is. A row deleted in the same save
    names no one, so its client may be added again at once."""

    def clean(self) -> None:
        super().clean()
        written = self._written()
        seen = self._kept_targets(written)
        for form in written:
            for field in _TARGETS:
                value = form.cleaned_data.get(field)
                if not value or field in form.errors:
                    continue
                target = (field, getattr(value, "pk", value))
                if target in seen:
                    form.add_error(field, "Another override names this client; keep one.")
                seen.add(target)

    def _written(self) -> list[forms.ModelForm]:
        """The rows the save writes: new or changed, not deleted. (A stored row that a
        user without the change permission posts changed is not written: Django's inline
        reports it unchanged.)"""
        return [
            form
            for form in self.forms
            if hasattr(form, "cleaned_data")
            and not self._should_delete_form(form)
            and form.has_changed()
        ]

    def _kept_targets(self, written: list[forms.ModelForm]) -> set[tuple[str, Any]]:
        """The clients of the policy's stored rows that the save neither deletes nor
        writes."""
        if self.instance.pk is None:
            return set()
        replaced = [
            form.instance.pk
            for form in self.initial_forms
            if form.instance.pk is not None and (self._should_delete_form(form) or form in written)
        ]
        kept = PolicyOverride.objects.filter(policy=self.instance).exclude(pk__in=replaced)
        return {
            (field, value)
            for row in kept.values_list("user_id", "group_id", "identity")
            for field, value in zip(_TARGETS, row, strict=True)
            if value
        }


_TARGETS = ("user", "group", "identity")


class PolicyOverrideInline(admin.TabularInline):
    """The policy's overrides on its change page; who may add, change or delete them is
    Django's ``ratelimits.*_policyoverride`` permissions, as for any inline."""

    model = PolicyOverride
    form = PolicyOverrideForm
    formset = PolicyOverrideFormSet
    fields = ("user", "group", "identity", "limit", "exempt", "comment")
    raw_id_fields = ("user", "group")
    extra = 0

    readonly_fields = ("identity_shown",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[PolicyOverride]:
        return super().get_queryset(request).select_related("user", "group")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = super().get_fields(request, obj)
        if self.has_add_permission(request, obj) or self.has_change_permission(request, obj):
            return fields
        # Read-only rows show the identity as the form does (an API key as its hash's
        # first digits), not the stored value.
        return [("identity_shown" if name == "identity" else name) for name in fields]

    @admin.display(description="identity")
    def identity_shown(self, obj: PolicyOverride) -> str:
        return override_identity.describe(obj.identity) if obj.identity else ""


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
    actions = ("enable", "disable", "switch_to_shadow", "switch_to_enforce", "reset_counters")
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
                    "memory_per_client",
                    "key",
                    "ipv6_prefix",
                    "fail_open",
                    "shards",
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
            columns = (_endpoint_column(_urlconf(request)), _denied_column())
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
            obj.algorithm or "sliding_counter", obj.limit, obj.calendar, obj.lockout or 0
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

    # -- actions -----------------------------------------------------------------------

    @admin.action(description="Enable the selected policies", permissions=["change"])
    def enable(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        self._bulk_set(request, queryset, "Enabled", enabled=True)

    @admin.action(description="Disable the selected policies", permissions=["change"])
    def disable(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        self._bulk_set(request, queryset, "Disabled", enabled=False)

    @admin.action(description="Switch to shadow mode (log, do not deny)", permissions=["change"])
    def switch_to_shadow(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        self._bulk_set(request, queryset, "Switched to shadow mode", mode="shadow")

    @admin.action(description="Switch to enforce mode", permissions=["change"])
    def switch_to_enforce(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        self._bulk_set(request, queryset, "Switched to enforce mode", mode="enforce")

    @admin.action(description="Reset the counters of the selected policies", permissions=["reset"])
    def reset_counters(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        total = lifted = 0
        for policy in queryset:
            removed = self._reset(request, policy)
            if removed is None:
                return
            total += removed[0]
            lifted += removed[1]
        self.message_user(request, f"Deleted {total} keys{_lifting(lifted)}.", messages.SUCCESS)

    def has_reset_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(RESET_PERMISSION)

    def _bulk_set(
        self, request: HttpRequest, queryset: QuerySet[Policy], verb: str, **values: Any
    ) -> None:
        field, value = next(iter(values.items()))
        label = capfirst(Policy._meta.get_field(field).verbose_name)  # as the form logs it
        targets = [p for p in queryset if getattr(p, field) != value]
        if targets:
            Policy.objects.filter(pk__in=[p.pk for p in targets]).update(**values)
        for policy in targets:
            setattr(policy, field, value)
            self.log_change(request, policy, [{"changed": {"fields": [label]}}])
        names = ", ".join(p.name for p in targets) or "none needed it"
        self.message_user(request, f"{verb}: {names}.", messages.SUCCESS)

    def _reset(
        self, request: HttpRequest, policy: Policy, who: str | None = None
    ) -> tuple[int, int] | None:
        """Delete the policy's keys (``who``'s only): ``(keys deleted, lockouts lifted)``,
        or ``None`` when Redis did not answer (said in a message)."""
        try:
            removed = reset_counters(policy.name, who)
        except (*connection.REDIS_ERRORS, ConfigurationError) as e:
            self.message_user(
                request, f"Redis {errors.what_went_wrong(e)}; nothing reset ({e}).", messages.ERROR
            )
            return None
        scope = f" of {who}" if who else ""
        deleted, lifted = removed
        self.log_change(
            request, policy, f"Reset counters{scope} ({deleted} keys{_lifting(lifted)})."
        )
        return removed

    # -- live usage and the reset view --------------------------------------------------

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(require_POST(self.reset_view))
        return [
            path("<path:object_id>/reset-counters/", view, name="ratelimits_policy_reset"),
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
        removed = self._reset(request, policy, who)
        if removed is not None:
            scope = f" of {who}" if who else ""
            deleted, lifted = removed
            self.message_user(
                request,
                f"Reset the counters{scope}: {deleted} keys deleted{_lifting(lifted)}.",
                messages.SUCCESS,
            )
        return HttpResponseRedirect(self._change_url(policy))

    def _change_url(self, policy: Policy) -> str:
        return reverse(f"{self.admin_site.name}:ratelimits_policy_change", args=[policy.pk])


def _lifting(lockouts: int) -> str:
    """``", 1 lockout lifted"``; "" for none."""
    if not lockouts:
        return ""
    return f", {lockouts} lockout{'' if lockouts == 1 else 's'} lifted"


def _urlconf(request: HttpRequest) -> str | None:
    """The URLconf this request was resolved with (a middleware may set its own)."""
    return getattr(request, "urlconf", None)


def _endpoint_column(urlconf: str | None) -> Callable[[Policy], Any]:
    """The endpoint column, with a warning icon on an endpoint that matches no URL name,
    scope or path; the URLconf is read once per page."""
    index = EndpointIndex(urlconf)

    @admin.display(description="endpoint", ordering="endpoint")
    def endpoint(obj: Policy) -> Any:
        problem = index.problem(obj.endpoint)
        if problem is None:
            return obj.endpoint
        return format_html(
            '{} <img src="{}" alt="{}" title="{}" class="ratelimits-unmatched">',
            obj.endpoint,
            static("admin/img/icon-alert.svg"),
            "(matches nothing)",
            f"This endpoint {problem}: the policy limits nothing.",
        )

    return endpoint


def _denied_column() -> Callable[[Policy], Any]:
    """A changelist column with each policy's denials in the last few minutes, read from
    Redis once per page."""
    counts: dict[str, int] | None
    try:
        counts = denied_since(DENIED_WINDOW_MINUTES)
    except (*connection.REDIS_ERRORS, ConfigurationError):
        counts = None

    @admin.display(description=f"denied ({DENIED_WINDOW_MINUTES} min)")
    def denied(obj: Policy) -> Any:
        if counts is None:
            return format_html('<span title="{}">?</span>', "Redis did not answer")
        return counts.get(obj.name, 0)

    return denied
