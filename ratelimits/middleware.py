"""Adds the RateLimit response headers for the decisions made during a request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

from ratelimits.conf import app_settings
from ratelimits.http import headers


class RateLimitHeadersMiddleware:
    """Put ``RateLimit-Policy`` and ``RateLimit`` on every response under a policy.

    Add ``"ratelimits.middleware.RateLimitHeadersMiddleware"`` to ``MIDDLEWARE``; turn the
    headers off with ``RATELIMITS = {"HEADERS": False}``.
    """

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        decisions = headers.decisions_of(request)
        if decisions and app_settings.HEADERS:
            policy = headers.policy_field(decisions)
            if policy:
                response["RateLimit-Policy"] = policy
                response["RateLimit"] = headers.ratelimit_field(decisions)
        return response
