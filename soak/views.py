"""The soak's own views, for the faces the demo has no view for: a plain synchronous view
that only ``RateLimitMiddleware`` limits, and one under the ``ratelimit`` decorator."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from ratelimits.decorators import ratelimit


def ping(request: HttpRequest) -> JsonResponse:
    """``GET /soak/ping/``: under no policy; the run waits for it at start."""
    return JsonResponse({"ok": True})


def plain(request: HttpRequest) -> JsonResponse:
    """``GET /soak/plain/``: a plain view, matched by its URL name ``soak:plain``."""
    return JsonResponse({"plain": True})


@ratelimit(scope="soak-quota")
def quota(request: HttpRequest) -> JsonResponse:
    """``GET /soak/quota/``: under the decorator's scope ``soak-quota``."""
    return JsonResponse({"quota": True})
