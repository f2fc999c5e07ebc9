"""Views under ``ratelimits.contrib.django_ratelimit.ratelimit`` (django-ratelimit's
decorator): each carries a spec, which that package turns into policy-file rows. The
rows are given here by the caller (the layers keep the faces above the tools)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
        if view.spec is None:
            continue
        rows = spec_rows(view.spec) if spec_rows is not None else None
        if rows is None:
            why = "ratelimits.contrib.django_ratelimit cannot read its spec here"
            plan.skipped.append(Skipped("django-ratelimit", [view.label], why))
            continue
        for row in rows:
            row = {**row, "mode": mode}
            name = str(row.get("name"))
            found = by_name.get(name)
            if name in clashes:
                clashes[name].views.append(view.label)
            elif found is None and name in taken:
                why = f"its policy's name {name!r} is taken by an adopted DRF throttle"
                clashes[name] = Skipped(f"django-ratelimit {name}", [view.label], why)
            elif found is None:
                by_name[name] = Adopted(row, [f"django-ratelimit on {view.label}"])
            elif found.row == row:
                found.replaces.append(f"django-ratelimit on {view.label}")
            else:
                del by_name[name]
                why = f"views ask for different policies under one name {name!r}"
                labels = [text.removeprefix("django-ratelimit on ") for text in found.replaces]
                clashes[name] = Skipped(f"django-ratelimit {name}", [*labels, view.label], why)
    taken.update(by_name)
    plan.adopted.extend(by_name.values())
    plan.skipped.extend(clashes.values())
