"""A middleware for tests that serve the demo with several worker processes: it names the
process that answers a request, to the limiter (as the request header ``X-Worker``, which
a ``header:X-Worker`` policy counts per worker) and to the client (the response header
``X-Worker``). It sits first in ``MIDDLEWARE`` and runs on the event loop under ASGI."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse

HEADER = "X-Worker"
_META = "HTTP_X_WORKER"


def worker_middleware(get_response: Callable[[HttpRequest], Any]) -> Any:
    if iscoroutinefunction(get_response):
        respond: Callable[[HttpRequest], Awaitable[HttpResponse]] = get_response

        async def amiddleware(request: HttpRequest) -> HttpResponse:
            request.META[_META] = str(os.getpid())
            response = await respond(request)
            response[HEADER] = str(os.getpid())
            return response

        return markcoroutinefunction(amiddleware)

    def middleware(request: HttpRequest) -> HttpResponse:
        request.META[_META] = str(os.getpid())
        response: HttpResponse = get_response(request)
        response[HEADER] = str(os.getpid())
        return response

    return middleware


worker_middleware.sync_capable = True  # type: ignore[attr-defined]
worker_middleware.async_capable = True  # type: ignore[attr-defined]
