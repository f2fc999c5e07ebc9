"""A native async view, limited by RateLimitMiddleware on the event loop."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse


async def hello(request: HttpRequest) -> JsonResponse:
    """``GET /hello/``: under the ``hello`` policy."""
    user = await request.auser()
    name = user.get_username() if user.is_authenticated else "stranger"
    return JsonResponse({"hello": name})
