"""What adopting the site's throttles would write: one policy per DRF counter, matching
exactly the views that spent it, and each throttle ratelimits cannot replace, with why."""

from __future__ import annotations

from typing import Any

from django.conf import settings

import ratelimits.tools.adoption.rows as policy_rows
from ratelimits.tools.adoption.endpoints import NoEndpoint, choose_endpoint
from ratelimits.tools.adoption.outcome import Adopted, AdoptionPlan, Skipped
from ratelimits.tools.adoption.specs import SpecRows, adopt_specs
from ratelimits.tools.adoption.throttles import (
    Counter,
    NotAdoptable,
    is_policy_throttle,
    read_throttle,
)
from ratelimits.tools.adoption.views import SpecsOf, View, site_views

#: The middleware that applies path policies to plain Django views too.
MIDDLEWARE = "ratelimits.middleware.RateLimitMiddleware"


def plan_adoption(
    mode: str,
    urlconf: str | None = None,
    spec_rows: SpecRows | None = None,
    specs_of: SpecsOf | None = None,
) -> AdoptionPlan:
    """Read the URLconf's views and their throttles into policies in ``mode``; writes
    nothing. ``specs_of`` finds a view's django-ratelimit specs and ``spec_rows`` turns
    one into policy-file rows (``None``: views carrying one are reported as skipped)."""
    views = site_views(urlconf, specs_of)
    plan = AdoptionPlan()
    counters = _read_counters(views, plan)
    guarded = _guarded(views, counters)
    taken: set[str] = set()
    for scope, uses in sorted(counters.items()):
        _adopt_counter(plan, scope, uses, guarded, mode, taken)
    adopt_specs(plan, views, spec_rows, mode, taken)
    merged = policy_rows.with_kept_fields(plan.rows)
    for adopted, row in zip(plan.adopted, merged, strict=True):
        adopted.row = row
    return plan


Uses = list[tuple[Counter, View]]


def _read_counters(views: list[View], plan: AdoptionPlan) -> dict[str, Uses]:
    """The DRF counters the views spend, by scope; each throttle that cannot be read goes to
    ``plan.skipped`` with the views it is on."""
    counters: dict[str, Uses] = {}
    unread: dict[tuple[Any, str], Skipped] = {}
    for view in views:
        if not view.is_drf:
            continue
        if view.decides_throttles:
            why = "its view overrides get_throttles(): its throttles are chosen per request"
            plan.skipped.append(Skipped("throttles", [view.label], why))
            continue
        for throttle in view.throttles or ():
            if is_policy_throttle(throttle):
                continue
            try:
                counter = read_throttle(throttle, view.scope)
            except NotAdoptable as e:
                name = getattr(throttle, "__name__", repr(throttle))
                skipped = unread.setdefault((throttle, str(e)), Skipped(name, [], str(e)))
                skipped.views.append(view.label)
                continue
            if counter is not None:
                counters.setdefault(counter.scope, []).append((counter, view))
    plan.skipped.extend(unread.values())
    return counters


def _guarded(views: list[View], counters: dict[str, Uses]) -> list[View]:
    """The views a policy would apply to once the adopted throttles are replaced by
    ``PolicyThrottle``: those spending a DRF counter or already under ``PolicyThrottle``;
    with ``RateLimitMiddleware`` installed, every view."""
    if MIDDLEWARE in getattr(settings, "MIDDLEWARE", ()):
        return views
    spending = {id(view) for uses in counters.values() for _, view in uses}
    return [
        view
        for view in views
        if id(view) in spending or any(is_policy_throttle(t) for t in view.throttles or ())
    ]


def _adopt_counter(
    plan: AdoptionPlan, scope: str, uses: Uses, guarded: list[View], mode: str, taken: set[str]
) -> None:
    """One policy for DRF's counter ``throttle_<scope>_…``, or a :class:`Skipped`."""
    throttles = sorted({counter.throttle_name for counter, _ in uses})
    what = f"{', '.join(throttles)} (scope {scope})"
    views = list({id(view): view for _, view in uses}.values())
    labels = [view.label for view in views]
    rates = {(counter.counts, counter.limit, counter.window) for counter, _ in uses}
    if len(rates) > 1:
        shown = ", ".join(sorted({f"{c.throttle_name} {c.rate}" for c, _ in uses}))
        why = (
            f"they share DRF's counter throttle_{scope}_<client> at different rates or "
            f"counting different clients ({shown}); one policy has one rate"
        )
        plan.skipped.append(Skipped(what, labels, why))
        return
    counter = uses[0][0]
    others = [view for view in guarded if all(view is not mine for mine in views)]
    shared_scope = scope if all(view.scope == scope for view in views) else None
    try:
        endpoint = choose_endpoint(views, others, shared_scope)
    except NoEndpoint as e:
        why = f"one policy must match exactly the views sharing this counter, and {e}"
        plan.skipped.append(Skipped(what, labels, why))
        return
    name = policy_rows.policy_name(scope, taken)
    replaces = [_use_text(c, view) for c, view in uses]
    plan.adopted.append(Adopted(policy_rows.counter_row(name, endpoint, counter, mode), replaces))


def _use_text(counter: Counter, view: View) -> str:
    """``UserRateThrottle 100/hour on /api/items/ (api:items), by default``."""
    default = " (DEFAULT_THROTTLE_CLASSES)" if view.by_default else ""
    return f"{counter.throttle_name} {counter.rate} on {view.label}{default}"
