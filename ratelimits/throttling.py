"""The DRF face: :class:`PolicyThrottle` applies the matching policies to a view.

Add it to ``REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"]`` (or a view's
``throttle_classes``). A view that no policy matches is not limited.
"""

from __future__ import annotations

import logging
from typing import Any

from rest_framework.throttling import BaseThrottle

from ratelimits import exemptions, identity, limiter, overrides, policy_table
from ratelimits.decision import Verdict
from ratelimits.policy_table import CompiledPolicy
from ratelimits.signals import request_throttled

DECISIONS_ATTRIBUTE = "ratelimit_decisions"

logger = logging.getLogger("ratelimits")


class PolicyThrottle(BaseThrottle):
    """Rate-limits a DRF view by the ``Policy`` rows that match it.

    A policy matches when its endpoint is the view's ``throttle_scope``, the resolved
    URL name (``namespace:name``), or a glob matching the path, and its methods are blank
    or hold the request's method. A policy's overrides give the request's user, group or
    identity another limit or exempt them (:mod:`ratelimits.overrides`), and requests from
    ``EXEMPT_NETWORKS`` are never limited. All matching policies are decided in one Redis
    call.
    Override :meth:`get_policies` or :meth:`get_identity` to change what matches or who
    is counted.
    """

    def __init__(self) -> None:
        self.verdict: Verdict | None = None

    def allow_request(self, request: Any, view: Any) -> bool:
        policies = self.get_policies(request, view)
        if not policies or exemptions.is_exempt(request):
            return True
        checks = []
        overridden = any(policy.overrides is not None for policy in policies)
        user_key = overrides.user_key(request) if overridden else None
        for policy in policies:
            who = self.get_identity(request, policy)
            if who is None:
                continue
            applied = policy.for_client(user_key, who) if overridden else policy
            if applied is not None:  # None: an override exempts this client
                checks.append(limiter.Check(applied, who, applied.pick_shard()))
        self.verdict = limiter.decide(checks)
        attach_decisions(request, self.verdict)
        if not self.verdict.allowed:
            send_throttled(request, self.verdict)
        return self.verdict.allowed

    def wait(self) -> float | None:
        """Seconds until a slot frees, from the script (DRF rounds it up for ``Retry-After``)."""
        return self.verdict.retry_after if self.verdict else None

    def get_policies(self, request: Any, view: Any) -> list[CompiledPolicy]:
        """The enabled policies that match this request."""
        match = getattr(request, "resolver_match", None)
        return policy_table.get_table().match(
            method=request.method,
            path=request.path,
            scope=getattr(view, "throttle_scope", None),
            url_name=match.view_name if match is not None else None,
        )

    def get_identity(self, request: Any, policy: CompiledPolicy) -> str | None:
        """Who ``request`` counts as under ``policy``; ``None`` leaves the policy out."""
        return identity.request_identity(policy.key_kind, request, policy.header_meta_key)


def attach_decisions(request: Any, verdict: Verdict) -> None:
    """Keep the decisions on the Django request, for the response-header middleware."""
    http_request = getattr(request, "_request", request)
    previous = getattr(http_request, DECISIONS_ATTRIBUTE, ())
    setattr(http_request, DECISIONS_ATTRIBUTE, (*previous, *verdict.decisions))


def send_throttled(request: Any, verdict: Verdict) -> None:
    """Send :data:`ratelimits.signals.request_throttled` for a request ``verdict`` denies.
    A receiver's exception is logged, not raised: the request is still a 429."""
    decisions = [decision for decision in verdict.decisions if decision.blocks]
    first = decisions[0]
    results = request_throttled.send_robust(
        PolicyThrottle,
        request=request,
        decisions=decisions,
        policy=first.policy,
        identity=first.identity,
    )
    for receiver, result in results:
        if isinstance(result, Exception):
            logger.error(
                "ratelimits: request_throttled receiver %r failed: %r",
                receiver,
                result,
                exc_info=result,
            )
