"""The policy's forms: the add and change form, and the changelist's editable row."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.utils.text import capfirst

from ratelimits.admin.widgets import EndpointInput
from ratelimits.engine.policy.periods import NOMINAL_WINDOW
from ratelimits.models import Counts, Mode, Policy


def field_label(name: str) -> str:
    """A policy field's label as the change form shows it, which is the name Django's
    history logs for a change to it: its verbose name, capitalised."""
    return capfirst(Policy._meta.get_field(name).verbose_name)


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

    mode = forms.ChoiceField(choices=[(m.value, m.value) for m in Mode], label=field_label("mode"))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A calendar period sets the window (Policy.normalize): an edit would be lost.
        if "window" in self.fields and self.instance.calendar:
            self.fields["window"].disabled = True
            self.fields["window"].help_text = "Set by the calendar period."
