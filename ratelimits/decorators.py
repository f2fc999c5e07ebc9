"""The view decorator: :func:`ratelimit` puts one view under the policies of a scope."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import iscoroutinefunction

from ratelimits.http import after_response, pipeline, view_asks

__all__ = ["ratelimit"]

View = TypeVar("View", bound=Callable[..., Any])


def ratelimit(
    *, scope: str, cost: int | Callable[[Any], int] | None = None
) -> Callable[[View], View]:
    """Apply to a view the policies whose endpoint is ``scope``, as DRF's
    ``throttle_scope`` does, and those that match its URL name or path.

    ``cost`` is what one request spends under them, instead of each policy's own cost:
    an int, or a callable ``(request) -> int`` for a cost known only from the request
    (a batch's size).

    Works on sync and async function views; on a class-based view through
    ``method_decorator(ratelimit(scope=...), name="dispatch")``. Over the limit the view
    does not run and the client gets a 429 (see :mod:`ratelimits.http.responses`). With
    ``RateLimitMiddleware`` installed too, each policy still counts a request once::

        @ratelimit(scope="signup")
        def signup(request): ...
    """
    view_asks.check_face_options("ratelimit", scope, cost, scope_required=True)
    ask = pipeline.Ask(ratelimit, scope, cost, answers=True)

    def decorate(view: View) -> View:
        if iscoroutinefunction(view):

            @functools.wraps(view)
            async def limited_async(request: Any, *args: Any, **kwargs: Any) -> Any:
                passage = await pipeline.arun(request, ask)
                if passage.verdict is None:
                    return await view(request, *args, **kwargs)
                if passage.refusal is not None:
                    return passage.refusal
                return await after_response.aserved(request, view, *args, **kwargs)

            return _marked(limited_async, scope, cost)

        @functools.wraps(view)
        def limited(request: Any, *args: Any, **kwargs: Any) -> Any:
            passage = pipeline.run(request, ask)
            if passage.verdict is None:
                return view(request, *args, **kwargs)
            if passage.refusal is not None:
                return passage.refusal
            return after_response.served(request, view, *args, **kwargs)

        return _marked(limited, scope, cost)

    return decorate


def _marked(limited: Callable[..., Any], scope: str, cost: Any) -> Any:
    """``limited`` carrying its scope and cost, for the middleware, the admin's endpoint
    suggestions and the checks (see :func:`ratelimits.http.view_asks.scope_of`)."""
    limited.ratelimit_scope = scope  # type: ignore[attr-defined]
    limited.ratelimit_cost = cost  # type: ignore[attr-defined]
    return limited
