"""The DRF face: :class:`PolicyThrottle` applies the matching policies to a view.

Add it to ``REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"]`` (or a view's
``throttle_classes``). A view that no policy matches is not limited.
"""

from __future__ import annotations

from typing import Any

from rest_framework.throttling import BaseThrottle

from ratelimits.engine import global_mode as mode
from ratelimits.engine.decision import Verdict
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.table.current import get_table
from ratelimits.http import after_response, pipeline, request_facts

__all__ = ["PolicyThrottle"]


class PolicyThrottle(BaseThrottle):
    """Rate-limits a DRF view by the ``Policy`` rows that match it.

    A policy matches when its endpoint is the view's ``throttle_scope``, the resolved
    URL name (``namespace:name``), or a glob matching the path, and its methods are blank
    or hold the request's method. A policy's overrides give the request's user, group or
    identity another limit or exempt them (:mod:`ratelimits.engine.policy.overrides`), and
    requests from ``EXEMPT_NETWORKS`` are never limited. All matching policies are decided
    in one Redis call.
    Override :meth:`get_policies` or :meth:`get_identity` to change what matches or who
    is counted.
    """

    #: Tells ``RateLimitMiddleware`` to leave this view to the throttle, which runs after
    #: DRF's authentication (see :data:`ratelimits.http.view_asks.APPLIES_POLICIES`).
    applies_ratelimits_policies = True

    def __init__(self) -> None:
        self.verdict: Verdict | None = None

    def allow_request(self, request: Any, view: Any) -> bool:
        if mode.is_off():  # before get_policies, which reads the table
            self.verdict = None
            return True
        identity_of = (
            None  # the default: each policy's key kind, the request's facts read once
            if type(self).get_identity is PolicyThrottle.get_identity
            else self.get_identity
        )
        ask = pipeline.Ask(
            PolicyThrottle,
            cost=getattr(view, "ratelimit_cost", None),
            policies=self.get_policies(request, view),
            identity_of=identity_of,
            status_of=lambda: _status_of(view),
        )
        # A policy another face decided for this request (the decorator) counts it once.
        self.verdict = pipeline.run(request, ask).verdict
        return self.verdict is None or self.verdict.allowed

    def wait(self) -> float | None:
        """Seconds until a slot frees, from the script (DRF rounds it up for ``Retry-After``)."""
        return self.verdict.retry_after if self.verdict else None

    def get_policies(self, request: Any, view: Any) -> list[CompiledPolicy]:
        """The enabled policies that match this request."""
        http = getattr(request, "_request", request)  # Django's, without DRF's proxying
        return get_table().match(
            method=request.method,  # DRF's: a cloned request may carry another method
            path=http.path,
            scope=getattr(view, "throttle_scope", None),
            url_name=request_facts.url_name(http),
        )

    def get_identity(self, request: Any, policy: CompiledPolicy) -> str | None:
        """Who ``request`` counts as under ``policy``; ``None`` leaves the policy out."""
        return request_facts.policy_identity(request, policy)


def _status_of(view: Any) -> int:
    """The status of the response a DRF view made: DRF keeps it as ``view.response``; a
    view whose exception DRF did not handle has none, and Django answers it with a 500."""
    response = getattr(view, "response", None)
    return after_response.SERVER_ERROR if response is None else int(response.status_code)
