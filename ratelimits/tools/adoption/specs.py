"""Views under ``ratelimits.contrib.django_ratelimit.ratelimit`` (django-ratelimit's
decorator): each carries a spec, which that package turns into policy-file rows. The
rows are given here by the caller (the layers keep the faces above the tools)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ratelimits.tools.adoption.outcome import Adopted, AdoptionPlan, Skipped
from ratelimits.tools.adoption.views import View

#: A view's spec to its policy-file rows; ``None`` when the package is not there.
SpecRows = Callable[[Any], "list[dict[str, Any]] | None"]


def adopt_specs(
    plan: AdoptionPlan, views: list[View], spec_rows: SpecRows | None, mode: str, taken: set[str]
) -> None:
    """Add to ``plan`` the rows of every view's spec, in ``mode``: one policy per name (views
    of one django-ratelimit ``group`` share it); two different rows of one name, or a name
    a DRF counter took, are skipped."""
    by_name: dict[str, Adopted] = {}
    clashes: dict[str, Skipped] = {}
    for view in views:
        for spec in view.specs:
            try:
                rows = spec_rows(spec) if spec_rows is not None else None
            except (ValueError, ImproperlyConfigured) as e:
                plan.skipped.append(Skipped("django-ratelimit", [view.label], str(e)))
                continue
            if rows is None:
                why = "ratelimits.contrib.django_ratelimit cannot read its spec here"
                plan.skipped.append(Skipped("django-ratelimit", [view.label], why))
                continue
            for row in rows:
                _add_row(by_name, clashes, taken, {**row, "mode": mode}, view)
    taken.update(by_name)
    plan.adopted.extend(by_name.values())
    plan.skipped.extend(clashes.values())


def _add_row(
    by_name: dict[str, Adopted],
    clashes: dict[str, Skipped],
    taken: set[str],
    row: dict[str, Any],
    view: View,
) -> None:
    """``row`` of ``view`` into ``by_name``; into ``clashes`` when its name is taken by a
    DRF counter's policy, or by another view's different row."""
    name = str(row.get("name"))
    found = by_name.get(name)
    replaced = f"django-ratelimit on {view.label}"
    if name in clashes:
        clashes[name].views.append(view.label)
    elif found is None and name in taken:
        why = f"its policy's name {name!r} is taken by an adopted DRF throttle"
        clashes[name] = Skipped(f"django-ratelimit {name}", [view.label], why)
    elif found is None:
        by_name[name] = Adopted(row, [replaced], "django-ratelimit")
    elif found.row == row:
        if replaced not in found.replaces:
            found.replaces.append(replaced)
    else:
        del by_name[name]
        why = f"views ask for different policies under one name {name!r}"
        labels = [text.removeprefix("django-ratelimit on ") for text in found.replaces]
        clashes[name] = Skipped(f"django-ratelimit {name}", [*labels, view.label], why)
