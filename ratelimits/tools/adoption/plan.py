"""What adopting the site's throttles would write: one policy per DRF counter, matching
exactly the views that spent it, and each throttle ratelimits cannot replace, with why.

A policy adopted from a DRF counter is named ``drf-<scope>`` (:data:`~.rows.PREFIX`): a
later run finds it by that name once the site's throttles are ``PolicyThrottle``, and
``--mode`` flips it whatever the views' throttle classes are by then.
"""

from __future__ import annotations

from collections import Counter as Tally
from typing import Any

from django.conf import settings

import ratelimits.tools.adoption.rows as policy_rows
from ratelimits.tools.adoption.axes import adopt_axes
from ratelimits.tools.adoption.endpoints import NoEndpoint, choose_endpoint
from ratelimits.tools.adoption.outcome import Adopted, AdoptionPlan, Skipped
from ratelimits.tools.adoption.specs import SpecRows, adopt_specs
from ratelimits.tools.adoption.throttles import (
    Counter,
    NotAdoptable,
    is_policy_throttle,
    read_throttle,
)
from ratelimits.tools.adoption.views import SpecsOf, View, distinct_routes, site_views

#: The middleware that applies path policies to plain Django views too.
MIDDLEWARE = "ratelimits.middleware.RateLimitMiddleware"


def plan_adoption(
    mode: str | None,
    urlconf: str | None = None,
    spec_rows: SpecRows | None = None,
    specs_of: SpecsOf | None = None,
) -> AdoptionPlan:
    """Read the URLconf's views and their throttles into policies in ``mode`` (``None``:
    a stored policy keeps its mode, a new one is in shadow); writes nothing. ``specs_of``
    finds a view's django-ratelimit specs and ``spec_rows`` turns one into policy-file rows
    (``None``: views carrying one are reported as skipped)."""
    views = site_views(urlconf, specs_of)
    plan = AdoptionPlan()
    counters, left_on_drf = _read_counters(views, plan)
    guarded = _guarded(views, counters)
    taken: set[str] = set()
    new_mode = mode or policy_rows.FIRST_MODE
    for scope, uses in sorted(counters.items()):
        _adopt_counter(plan, scope, uses, left_on_drf.get(scope, []), guarded, new_mode, taken)
    adopt_specs(plan, views, spec_rows, new_mode, taken)
    adopt_axes(plan, new_mode, taken)
    _adopted_earlier(plan, mode, taken)
    merged = policy_rows.with_kept_fields(plan.rows, keep_mode=mode is None)
    for adopted, row in zip(plan.adopted, merged, strict=True):
        adopted.row = row
    return plan


#: Each (counter, view) a throttle spends, once per throttle: a view with two throttles on
#: one counter is there twice.
Uses = list[tuple[Counter, View]]


def _read_counters(
    views: list[View], plan: AdoptionPlan
) -> tuple[dict[str, Uses], dict[str, list[View]]]:
    """``(the DRF counters the views spend by scope, the views left on DRF that spend
    them)``; each throttle that cannot be read goes to ``plan.skipped`` with its views."""
    counters: dict[str, Uses] = {}
    left_on_drf: dict[str, list[View]] = {}
    unread: dict[tuple[Any, str], Skipped] = {}
    for view in views:
        if not view.is_drf:
            continue
        if view.decides_throttles:
            why = "its view overrides get_throttles(): its throttles are chosen per request"
            plan.skipped.append(Skipped("throttles", [view.label], why))
        for throttle in view.throttles or ():
            if is_policy_throttle(throttle):
                continue
            try:
                counter = read_throttle(throttle, view.scope)
            except NotAdoptable as e:
                if not view.decides_throttles:
                    name = getattr(throttle, "__name__", repr(throttle))
                    skipped = unread.setdefault((throttle, str(e)), Skipped(name, [], str(e)))
                    skipped.views.append(view.label)
                continue
            if counter is None:
                continue
            if view.decides_throttles:
                # Its throttle_classes are what get_throttles() most often starts from.
                left_on_drf.setdefault(counter.scope, []).append(view)
            else:
                counters.setdefault(counter.scope, []).append((counter, view))
    plan.skipped.extend(unread.values())
    return counters, left_on_drf


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
    plan: AdoptionPlan,
    scope: str,
    uses: Uses,
    left_on_drf: list[View],
    guarded: list[View],
    mode: str,
    taken: set[str],
) -> None:
    """One policy for DRF's counter ``throttle_<scope>_…``, or a :class:`Skipped`."""
    throttles = sorted({counter.throttle_name for counter, _ in uses})
    what = f"{', '.join(throttles)} (scope {scope})"
    views = list({id(view): view for _, view in uses}.values())
    labels = distinct_routes(views)
    rates = {(counter.counts, counter.limit, counter.window) for counter, _ in uses}
    counter = uses[0][0]
    if len(rates) > 1:
        shown = ", ".join(sorted({f"{c.throttle_name} {c.rate}" for c, _ in uses}))
        why = (
            f"they share DRF's counter throttle_{scope}_<client> at different rates or "
            f"counting different clients ({shown}); one policy has one rate"
        )
        plan.skipped.append(Skipped(what, labels, why))
        return
    if left_on_drf:
        plan.skipped.append(Skipped(what, labels, _split_counter(scope, counter, left_on_drf)))
        return
    spends = Tally(id(view) for _, view in uses)
    if len(set(spends.values())) > 1:
        plan.skipped.append(Skipped(what, labels, _uneven_spending(scope, views, spends)))
        return
    others = [view for view in guarded if all(view is not mine for mine in views)]
    try:
        endpoint = choose_endpoint(views, others)
    except NoEndpoint as e:
        why = f"one policy must match exactly the views sharing this counter, and {e}"
        plan.skipped.append(Skipped(what, labels, why))
        return
    name = policy_rows.policy_name(scope, taken)
    cost = next(iter(spends.values()))
    replaces = [_use_text(c, view) for c, view in _distinct_uses(uses)]
    row = policy_rows.counter_row(name, endpoint, counter, mode, cost=cost)
    short = f"{', '.join(throttles)} {counter.rate}"
    if cost > 1:
        short += f" (DRF spends {cost} per request: {cost} throttles on one counter)"
    plan.adopted.append(Adopted(row, replaces, short))


def _split_counter(scope: str, counter: Counter, left_on_drf: list[View]) -> str:
    """Why a counter that a view left on DRF spends too is not adopted, and what adopting
    it would do."""
    shown = ", ".join(distinct_routes(left_on_drf))
    return (
        f"{shown} spends DRF's counter throttle_{scope}_<client> too and stays on DRF (its "
        "view overrides get_throttles()); adopted, the other views would count apart from "
        f"it: a client could get {counter.limit} there and {counter.limit} on the others "
        f"per {counter.window} s instead of {counter.limit} in all. Keep this throttle on "
        "DRF, or give that view a get_throttles() adopt can read (throttle_classes)"
    )


def _uneven_spending(scope: str, views: list[View], spends: Tally[int]) -> str:
    """Why a counter some views spend twice per request and others once is not adopted."""
    most = max(spends.values())
    doubled = distinct_routes([view for view in views if spends[id(view)] == most])
    return (
        f"DRF spends {most} of throttle_{scope}_<client> per request on "
        f"{', '.join(doubled)} (throttles of one scope, such as a throttle_scope equal to "
        f"the {scope} throttle's scope, each record the request) and fewer on the others; "
        "DRF records the first of them even when the next denies the request, a policy "
        "spends all or nothing, so no policy admits exactly what DRF does. Give that view "
        "a throttle_scope of its own, or leave it as it is on DRF"
    )


def _adopted_earlier(plan: AdoptionPlan, mode: str | None, taken: set[str]) -> None:
    """The policies an earlier run adopted from DRF counters no view spends now: with a
    ``mode``, rows putting them in it; without, named in ``plan.kept``."""
    for policy in policy_rows.adopted_policies(exclude=taken):
        if mode is None:
            plan.kept.append((policy.name, policy.mode))
            continue
        row = {**policy_rows.stored_row(policy), "mode": mode}
        plan.adopted.append(Adopted(row, [], "adopted earlier; its DRF throttles are gone"))
        taken.add(policy.name)


def _distinct_uses(uses: Uses) -> Uses:
    """``uses`` once per view, without a router's ``.<format>`` twin of a listed route."""
    kept = {id(view) for view in _distinct_views([view for _, view in uses])}
    seen: set[int] = set()
    found = []
    for counter, view in uses:
        if id(view) in kept and id(view) not in seen:
            seen.add(id(view))
            found.append((counter, view))
    return found


def _distinct_views(views: list[View]) -> list[View]:
    labels = set(distinct_routes(views))
    return [view for view in views if view.label in labels]


def _use_text(counter: Counter, view: View) -> str:
    """``UserRateThrottle 100/hour on /api/items/ (api:items), by default``."""
    default = " (DEFAULT_THROTTLE_CLASSES)" if view.by_default else ""
    return f"{counter.throttle_name} {counter.rate} on {view.label}{default}"
