"""The plain-Django faces that sit in ``MIDDLEWARE``: the limiter and the header writer.

Both are sync- and async-capable: under ASGI an async view is limited, and its headers
written, on the event loop with no thread in between.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse

from ratelimits.engine.decision import Verdict
from ratelimits.http import after_response, headers, pipeline, responses, sign_in, view_asks

__all__ = ["RateLimitHeadersMiddleware", "RateLimitMiddleware"]

#: The status of a response that says "too many requests".
THROTTLED = 429


class RateLimitMiddleware:
    """Apply the matching policies to every request, after URL resolution.

    A policy matches by path glob, by URL name (``namespace:name``), or by the scope a
    view carries from :func:`ratelimits.decorators.ratelimit`. Over the limit the
    request is answered with a 429 (see :mod:`ratelimits.http.responses`) and the view
    does not run. A DRF view under ``PolicyThrottle``, and a django-ninja operation under
    ``ratelimits.contrib.ninja.PolicyThrottle``, is left to that throttle: the framework
    authenticates first (a token's user, an API key, is known only then), its throttle
    decides the same policies, and its own 429 answers; only the policies that count
    failures are decided here, before that authentication, so that a wrong credential
    counts and an attempt over the limit is refused before any credential is checked.
    Each policy counts a request once, whichever faces it meets. A sign-in that
    ``ratelimits.backends.RateLimitBackend`` refused is answered with a 429.

    After the view it notes the response's status for every face below it, so policies
    that count only failures or successes, and concurrency slots, are settled when the
    response has been sent (see :mod:`ratelimits.http.after_response`).

    Add ``"ratelimits.middleware.RateLimitMiddleware"`` to ``MIDDLEWARE``, below
    ``RateLimitHeadersMiddleware`` and Django's ``AuthenticationMiddleware``.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
            # Django adapts process_view to the handler: an async one keeps it on the loop.
            self.process_view = self.aprocess_view  # type: ignore[method-assign]

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        response = self.get_response(request)
        refused = _seen(request, response)
        return response if refused is None else responses.throttled(request, refused)

    async def _acall(self, request: HttpRequest) -> Any:
        try:
            response = await self.get_response(request)
        except asyncio.CancelledError:  # the client went away before a response
            after_response.went_away(request)
            raise
        refused = _seen(request, response)
        return response if refused is None else await responses.athrottled(request, refused)

    def process_view(
        self, request: HttpRequest, view_func: Any, view_args: Any, view_kwargs: Any
    ) -> HttpResponse | None:
        return pipeline.run(request, _asked(request, view_func)).refusal

    async def aprocess_view(
        self, request: HttpRequest, view_func: Any, view_args: Any, view_kwargs: Any
    ) -> HttpResponse | None:
        """:meth:`process_view` when the chain is async."""
        return (await pipeline.arun(request, _asked(request, view_func))).refusal


def _asked(request: HttpRequest, view_func: Any) -> pipeline.Ask:
    """What the middleware asks of the pipeline for ``view_func`` (see
    :func:`ratelimits.http.view_asks.middleware_scope`); a denial is answered with its 429."""
    scope, before = view_asks.middleware_scope(view_func, request.method or "")
    cost = view_asks.cost_of(view_func)
    return pipeline.Ask(RateLimitMiddleware, scope, cost, before, answers=True)


def _seen(request: HttpRequest, response: Any) -> Verdict | None:
    """Note ``response``'s status for whichever face admitted the request (it decides
    what counts); the refusal of a sign-in ``RateLimitBackend`` refused, to answer with
    a 429 instead, if the response is not one already."""
    after_response.saw(request, response.status_code)
    refused = sign_in.refusal(request)
    return refused if refused is not None and response.status_code != THROTTLED else None


class RateLimitHeadersMiddleware:
    """Put ``RateLimit-Policy`` and ``RateLimit`` on every response under a policy.

    Add ``"ratelimits.middleware.RateLimitHeadersMiddleware"`` to ``MIDDLEWARE``, above
    ``RateLimitMiddleware``; turn the headers off with ``RATELIMITS = {"HEADERS": False}``.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        response = self.get_response(request)
        headers.write(response, headers.decisions_of(request))
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        response = await self.get_response(request)
        headers.write(response, headers.decisions_of(request))
        return response
