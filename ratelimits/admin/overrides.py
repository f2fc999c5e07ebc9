"""The policy's overrides on its change page: the row's form, the formset that refuses a
client named twice, and the inline that shows them."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from ratelimits.engine.policy import override_identity
from ratelimits.models import Policy, PolicyOverride


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
