"""The 429 the middleware and the decorator answer a denied request with.

``Retry-After`` is the whole seconds, rounded up, until a slot frees; the RateLimit
fields (when ``HEADERS`` is on) describe every policy decided for the request. The body
is JSON when the client prefers JSON to HTML (its ``Accept`` header) or sends
``X-Requested-With: XMLHttpRequest`` (jQuery's and many front ends' mark of a script's
request), a line of text otherwise. ``RATELIMITS["THROTTLED_VIEW"]`` names a view
``(request, exception)`` that renders it instead, as ``CSRF_FAILURE_VIEW`` does for CSRF
failures; the headers are added to what it returns when it leaves them out.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync, iscoroutinefunction, sync_to_async
from django.http import HttpResponse, JsonResponse
from django.utils.module_loading import import_string

from ratelimits.conf import app_settings
from ratelimits.engine.decision import Verdict
from ratelimits.exceptions import Throttled
from ratelimits.http import headers

logger = logging.getLogger("ratelimits")

STATUS = 429


def throttled(request: Any, verdict: Verdict) -> HttpResponse:
    """The response to a request ``verdict`` denies."""
    exception = _exception(verdict)
    view = throttled_view()
    if view is None:
        response = default(request, exception)
    elif iscoroutinefunction(view):
        response = async_to_sync(view)(request, exception)
    else:
        response = view(request, exception)
    return _completed(response, request, exception)


async def athrottled(request: Any, verdict: Verdict) -> HttpResponse:
    """:func:`throttled` from a coroutine (a sync ``THROTTLED_VIEW`` runs in a thread)."""
    exception = _exception(verdict)
    view = throttled_view()
    if view is None:
        response = default(request, exception)
    elif iscoroutinefunction(view):
        response = await view(request, exception)
    else:
        response = await sync_to_async(view)(request, exception)
    return _completed(response, request, exception)


def default(request: Any, exception: Throttled) -> HttpResponse:
    """The built-in 429: ``{"detail": ..., "retry_after": N}`` for JSON clients, else text."""
    detail = f"Too many requests. Try again in {exception.retry_after} seconds."
    if wants_json(request):
        body = {"detail": detail, "retry_after": exception.retry_after}
        return JsonResponse(body, status=STATUS)
    return HttpResponse(detail + "\n", status=STATUS, content_type="text/plain; charset=utf-8")


def wants_json(request: Any) -> bool:
    """True when ``request`` should get JSON: its ``Accept`` header prefers it
    (:func:`prefers_json`), or it says it comes from a script (``X-Requested-With:
    XMLHttpRequest``, as jQuery and many front ends send)."""
    meta = request.META
    if meta.get("HTTP_X_REQUESTED_WITH", "").strip().lower() == "xmlhttprequest":
        return True
    return prefers_json(meta.get("HTTP_ACCEPT", ""))


def prefers_json(accept: str) -> bool:
    """True when an ``Accept`` header ranks a JSON type above HTML (``*/*`` alone: no)."""
    json_q = html_q = 0.0
    for item in accept.split(","):
        media, _, params = item.strip().partition(";")
        media = media.strip().lower()
        quality = _quality(params)
        if media == "application/json" or (media.startswith("application/") and "+json" in media):
            json_q = max(json_q, quality)
        elif media in ("text/html", "application/xhtml+xml"):
            html_q = max(html_q, quality)
    return json_q > 0 and json_q >= html_q


def throttled_view() -> Callable[..., Any] | None:
    """The ``THROTTLED_VIEW`` callable, or ``None`` for the built-in response (also when
    the setting cannot be used: that is logged, and system check ``E006`` reports it)."""
    path = app_settings.THROTTLED_VIEW
    return _import_view(path) if path else None


@functools.cache
def _import_view(path: str) -> Callable[..., Any] | None:
    try:
        view = import_string(path)
    except ImportError as e:
        logger.error("ratelimits: THROTTLED_VIEW %r cannot be imported (%s).", path, e)
        return None
    if not callable(view):
        logger.error("ratelimits: THROTTLED_VIEW %r is not callable.", path)
        return None
    return view  # type: ignore[no-any-return]


def _quality(params: str) -> float:
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return min(max(float(value), 0.0), 1.0)
            except ValueError:
                return 0.0
    return 1.0


def _exception(verdict: Verdict) -> Throttled:
    return Throttled(verdict, max(1, math.ceil(verdict.retry_after)))


def _completed(response: HttpResponse, request: Any, exception: Throttled) -> HttpResponse:
    if not response.has_header("Retry-After"):
        response["Retry-After"] = str(exception.retry_after)
    headers.write(response, headers.decisions_of(request))
    return response
