"""One ``@ratelimit`` (a :class:`~.spec.Spec`) decided for one request: its policy at the
rate that applies, who the request counts as, the decision where the counters live, and
what the request keeps of it (its decisions for the response headers, what a response
gives back, the signals, the 429).

A request counts once per policy between ``RateLimitMiddleware`` (or another face) and
the decorator: a policy another face decided for the request is not decided again. A
request object passed to a decorated view twice counts twice, as in django-ratelimit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

import ratelimits.contrib.django_ratelimit.policies as policies
import ratelimits.contrib.django_ratelimit.rates as rates
from ratelimits import signals
from ratelimits.contrib.django_ratelimit.identities import identity_of
from ratelimits.contrib.django_ratelimit.spec import Spec
from ratelimits.engine import global_mode as mode
from ratelimits.engine.decision import Decision, Verdict
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.http import after_response, request_facts, responses
from ratelimits.http.headers import attach_decisions, decisions_of

#: The request attribute counting, per policy name, the decisions the decorator made.
OWN_ATTRIBUTE = "_django_ratelimit_decided"


@dataclass(frozen=True, slots=True)
class Applied:
    """What applies to a request under a spec: the spec at the request's rate, and its
    enabled policy (``None`` when the rate is ``0/m``: every request is over)."""

    spec: Spec
    policy: CompiledPolicy | None


def enabled() -> bool:
    """django-ratelimit's ``RATELIMIT_ENABLE`` is on and ``RATELIMITS["MODE"]`` is not
    ``"off"`` (then no table is read, no policy written and Redis is not called)."""
    return bool(getattr(settings, "RATELIMIT_ENABLE", True)) and not mode.is_off()


def at_rate(spec: Spec, request: Any) -> Spec | None:
    """``spec`` at the rate that applies to ``request`` (a rate computed per request is
    asked now); ``None`` when there is no limit or the method is not limited. A spec
    without a key is refused here, when the view is called, as django-ratelimit does."""
    if spec.rate is None or (spec.methods and request.method not in spec.methods):
        return None
    if not spec.policy_key:
        raise ImproperlyConfigured(
            "ratelimits.contrib.django_ratelimit: a key is needed (django-ratelimit "
            "refuses a view without one too)."
        )
    if not spec.per_request:
        return spec
    found = rates.rate_of(spec.rate, spec.group or "", request)
    return None if found is None else spec.with_rate(*found)


def applied(spec: Spec, request: Any) -> Applied | None:
    """What applies to ``request`` under ``spec`` (``None``: nothing, or the policy is
    disabled)."""
    found = at_rate(spec, request) if enabled() else None
    if found is None:
        return None
    if not found.limit:
        return Applied(found, None)
    policy = policies.policy_for(found)
    return None if policy is None else _if_method(Applied(found, policy), request)


async def aapplied(spec: Spec, request: Any) -> Applied | None:
    """:func:`applied` from a coroutine."""
    found = at_rate(spec, request) if enabled() else None
    if found is None:
        return None
    if not found.limit:
        return Applied(found, None)
    policy = await policies.apolicy_for(found)
    return None if policy is None else _if_method(Applied(found, policy), request)


def _if_method(found: Applied, request: Any) -> Applied | None:
    """``found`` unless the policy (as an operator may have edited it) leaves the method
    out."""
    methods = found.policy.methods if found.policy is not None else ()
    return None if methods and request.method not in methods else found


def checks(found: Applied, request: Any) -> list[Any]:
    """The checks to decide for ``request`` (none when another face decided the policy
    for it already, or an override exempts the client)."""
    policy = found.policy
    if policy is None or _decided_elsewhere(request, policy.name):
        return []
    spec = found.spec
    who = identity_of(spec.key, spec.code_key, spec.group or "")
    return request_facts.checks_for(request, [policy], who)


def settled(request: Any, found: Applied, verdict: Verdict | None) -> bool:
    """Keep ``verdict`` on ``request`` (``None``: nothing was decided now); True when the
    request is over the spec's limit."""
    if found.policy is None:
        return True  # 0/m
    if verdict is not None:
        attach_decisions(request, verdict.decisions)
        own = _own(request)
        for decision in verdict.decisions:
            own[decision.policy] = own.get(decision.policy, 0) + 1
        if verdict.receipt is not None:
            after_response.hold(request, verdict.receipt)
    latest = _latest(request, found.policy.name)
    return latest is not None and latest.blocks


def announced(verdict: Verdict) -> list[Any]:
    """What to send about ``verdict`` (:mod:`ratelimits.signals`)."""
    return signals.announcements(verdict)


def refusal(request: Any, verdict: Verdict | None) -> Any:
    """ratelimits' 429 for a blocked request."""
    return responses.throttled(request, verdict or Verdict())


async def arefusal(request: Any, verdict: Verdict | None) -> Any:
    """:func:`refusal` from a coroutine."""
    return await responses.athrottled(request, verdict or Verdict())


def _own(request: Any) -> dict[str, int]:
    http = getattr(request, "_request", request)
    own = getattr(http, OWN_ATTRIBUTE, None)
    if own is None:
        own = {}
        setattr(http, OWN_ATTRIBUTE, own)
    return own


def _decided_elsewhere(request: Any, name: str) -> bool:
    made = decisions_of(getattr(request, "_request", request))
    total = sum(1 for decision in made if decision.policy == name)
    return total > _own(request).get(name, 0)


def _latest(request: Any, name: str) -> Decision | None:
    made = decisions_of(getattr(request, "_request", request))
    for decision in reversed(made):
        if decision.policy == name:
            return decision
    return None
