"""``GET /ratelimits/usage/``: the caller's own usage of each policy that counts it, as
JSON, spending nothing (``ratelimits.urls`` mounts :class:`UsageView` as
``ratelimits:usage``).

:class:`UsageView` is a DRF view, so a client is known as it authenticates to the API:
by the classes of ``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]``, read at each
request (add ``TokenAuthentication`` there, or mount
``UsageView.as_view(authentication_classes=[...])`` yourself), except HTTP Basic: a
password is never checked here, so the endpoint cannot be used to guess one (a Basic
caller is answered as anonymous, by its address). It is under
:class:`~ratelimits.throttling.PolicyThrottle`, after that authentication: a policy whose
endpoint is ``ratelimits:usage`` limits it like any other view, and
``RateLimitMiddleware`` leaves it to the throttle. Anyone may call it: it shows only the
caller's numbers. :func:`usage_response` answers for any request, so another framework
can serve the same JSON after its own authentication (a django-ninja operation with an
API key: see docs/usage.md). Every answer is ``Cache-Control: private, no-store``: it
is one client's numbers, of the moment.
"""

from __future__ import annotations

import math
from typing import Any

from django.http import JsonResponse
from django.utils.cache import patch_cache_control
from rest_framework.authentication import BaseAuthentication, BasicAuthentication
from rest_framework.renderers import JSONRenderer
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from ratelimits.conf import app_settings
from ratelimits.engine import global_mode as mode
from ratelimits.exceptions import RedisUnavailable
from ratelimits.http.client_usage import usage_of
from ratelimits.throttling import PolicyThrottle

__all__ = ["UsageView", "usage_response"]

#: The status when Redis cannot answer: the numbers are unknown, never guessed.
UNAVAILABLE = 503


def usage_response(request: Any) -> JsonResponse:
    """``{"policies": [...]}`` for the client of ``request`` (a Django request, or DRF's
    or django-ninja's after their authentication); a 503 with ``{"detail": ...}`` when
    Redis cannot answer, with ``Retry-After`` the circuit breaker's cooldown. Under a
    ``RATELIMITS["MODE"]`` other than ``"enforce"`` the answer says it first:
    ``{"mode": "off", "policies": []}`` (nothing read), ``{"mode": "shadow", ...}``."""
    current = mode.current()
    try:
        found = [] if current == mode.OFF else usage_of(request)
    except RedisUnavailable:
        detail = "Rate-limit usage is unavailable: its store did not answer. Try again later."
        response = JsonResponse({"detail": detail}, status=UNAVAILABLE)
        response["Retry-After"] = str(max(1, math.ceil(float(app_settings.BREAKER_COOLDOWN))))
    else:
        body: dict[str, Any] = {} if current == mode.ENFORCE else {"mode": current}
        body["policies"] = [usage.as_json() for usage in found]
        response = JsonResponse(body)
    patch_cache_control(response, private=True, no_store=True)
    return response


class UsageView(APIView):
    """GET: the caller's own usage of each policy that counts it, as JSON, spending
    nothing."""  # also the description DRF gives OPTIONS: plain words, no markup

    #: ``None``: ``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]``, read per request,
    #: without HTTP Basic (a password oracle).
    authentication_classes: Any = None
    permission_classes: Any = ()
    throttle_classes = (PolicyThrottle,)
    renderer_classes = (JSONRenderer,)
    http_method_names = ["get", "head", "options"]

    def get_authenticators(self) -> list[BaseAuthentication]:
        classes = self.authentication_classes
        if classes is None:
            classes = [
                authentication
                for authentication in api_settings.DEFAULT_AUTHENTICATION_CLASSES
                if not issubclass(authentication, BasicAuthentication)
            ]
        return [authentication() for authentication in classes]

    def get(self, request: Any) -> JsonResponse:
        return usage_response(request)


usage_view = UsageView.as_view()
