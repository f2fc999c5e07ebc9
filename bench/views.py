"""The benchmark's views: one DRF view per limiter compared, all answering the same tiny
JSON body, so that the only difference between two of them is the limiter.

- :class:`UnthrottledView`: no throttle (the baseline every overhead is measured from).
- :class:`PolicyView`: :class:`ratelimits.throttling.PolicyThrottle`; its
  ``throttle_scope`` is the URL's ``scope``, so the benchmark's policies match it by scope.
- DRF's ``AnonRateThrottle`` and ``UserRateThrottle`` on the default cache (django-redis)
  at ``limit``/hour (DRF rates are per second, minute, hour or day only).
- django-ratelimit's ``@ratelimit(key="ip", rate=f"{limit}/h", block=True)``.
- The ``limits`` library (``RedisStorage`` on the benchmark's Redis) in a DRF throttle:
  ``MovingWindowRateLimiter`` and ``SlidingWindowCounterRateLimiter``, ``limit`` per hour.
- django-smart-ratelimit: its middleware (wrapped by :class:`SmartRatelimitMiddleware`
  to see only ``/smart/`` paths) with a ``RateLimitRule`` row per limit, in front of an
  unthrottled view.
- Plain Django views, sync and async (:func:`plain_view`, :func:`plain_async_view`): the
  middleware face's twins, limited by ``RateLimitMiddleware`` where a policy's path glob
  matches their URL (:mod:`bench.asyncpath`); and an async view under the ``limits``
  library's async API (:func:`limits_aio_view`: ``limits.aio``, ``async+redis://``).

A per-limit view is built on the first request for its limit (:class:`PerLimit`), the
way a project would declare it, and kept.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django_ratelimit.decorators import ratelimit
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle, BaseThrottle, UserRateThrottle
from rest_framework.views import APIView

from ratelimits.throttling import PolicyThrottle

#: Path prefix that django-smart-ratelimit's middleware sees.
SMART_PREFIX = "/smart/"
BODY = {"ok": True}


class BenchView(APIView):
    """The shape every benchmark view shares: JSON only, no throttle unless told."""

    renderer_classes = [JSONRenderer]
    throttle_classes: list[type[BaseThrottle]] = []

    def get(self, request: Request, **kwargs: Any) -> Response:
        return Response(BODY)


class UnthrottledView(BenchView):
    """No limiter: the baseline."""


class PolicyView(BenchView):
    """Limited by the policies whose endpoint is this URL's ``scope``."""

    throttle_classes = [PolicyThrottle]

    @property
    def throttle_scope(self) -> str | None:  # type: ignore[override]
        return self.kwargs.get("scope")


def drf_throttle_view(base: type[AnonRateThrottle | UserRateThrottle], limit: int) -> Callable:
    """A view under DRF's ``base`` throttle at ``limit`` per hour (own cache scope)."""
    kind = "anon" if issubclass(base, AnonRateThrottle) else "user"
    throttle = type(
        f"Bench{base.__name__}{limit}",
        (base,),
        {"rate": f"{limit}/hour", "scope": f"bench_{kind}_{limit}"},
    )
    view = type(f"Drf{kind.title()}View{limit}", (BenchView,), {"throttle_classes": [throttle]})
    return view.as_view()


def django_ratelimit_view(limit: int) -> Callable:
    """A view under django-ratelimit's decorator: ``limit`` per hour per IP, blocking."""

    class DjangoRatelimitView(BenchView):
        @method_decorator(
            ratelimit(group=f"bench-djrl-{limit}", key="ip", rate=f"{limit}/h", block=True)
        )
        def get(self, request: Request, **kwargs: Any) -> Response:
            return Response(BODY)

    return DjangoRatelimitView.as_view()


@functools.cache
def limits_storage() -> Any:
    """One ``limits`` Redis storage per process, on the benchmark's Redis."""
    from limits.storage import RedisStorage

    return RedisStorage(settings.REDIS_URL)


class LimitsThrottle(BaseThrottle):
    """The ``limits`` library as a DRF throttle: ``strategy`` at ``limit`` per hour, per
    client address (DRF's ``get_ident``)."""

    strategy = "moving"
    limit = 100

    def __init__(self) -> None:
        from limits import RateLimitItemPerHour
        from limits.strategies import MovingWindowRateLimiter, SlidingWindowCounterRateLimiter

        limiters = {
            "moving": MovingWindowRateLimiter,
            "counter": SlidingWindowCounterRateLimiter,
        }
        self.limiter = _limiter(limiters[self.strategy])
        self.item = RateLimitItemPerHour(self.limit)

    def allow_request(self, request: Any, view: Any) -> bool:
        return bool(self.limiter.hit(self.item, "bench", self.strategy, self.get_ident(request)))


@functools.cache
def _limiter(cls: type) -> Any:
    return cls(limits_storage())


def limits_view(strategy: str, limit: int) -> Callable:
    """A view under the ``limits`` library's ``strategy`` (``moving`` or ``counter``)."""
    throttle = type(
        f"Limits{strategy.title()}{limit}",
        (LimitsThrottle,),
        {"strategy": strategy, "limit": limit},
    )
    view = type(
        f"LimitsView{strategy.title()}{limit}", (BenchView,), {"throttle_classes": [throttle]}
    )
    return view.as_view()


def plain_view(request: HttpRequest, limit: int) -> HttpResponse:
    """A plain Django view (no DRF): the sync twin of the middleware face."""
    return JsonResponse(BODY)


async def plain_async_view(request: HttpRequest, limit: int) -> HttpResponse:
    """A plain async Django view: served on the event loop under an ASGI handler."""
    return JsonResponse(BODY)


@functools.cache
def limits_aio_limiter() -> Any:
    """The ``limits`` library's async moving window on the benchmark's Redis (its redis-py
    implementation, ``redis.asyncio``), one per process: its connections belong to the
    event loop that first uses it."""
    from limits.aio.storage import RedisStorage
    from limits.aio.strategies import MovingWindowRateLimiter

    return MovingWindowRateLimiter(
        RedisStorage(f"async+{settings.REDIS_URL}", implementation="redispy")
    )


@functools.cache
def _per_hour(limit: int) -> Any:
    from limits import RateLimitItemPerHour

    return RateLimitItemPerHour(limit)


async def limits_aio_view(request: HttpRequest, limit: int) -> HttpResponse:
    """An async view under ``limits.aio``: ``limit`` per hour per client address."""
    address = request.META.get("REMOTE_ADDR", "")
    if not await limits_aio_limiter().hit(_per_hour(limit), "bench-aio", address):
        return JsonResponse({"detail": "throttled"}, status=429)
    return JsonResponse(BODY)


class PerLimit:
    """A view that hands each request to ``factory(limit)``'s view, built once per limit."""

    def __init__(self, factory: Callable[[int], Callable]) -> None:
        self.factory = factory
        self.views: dict[int, Callable] = {}

    def __call__(self, request: HttpRequest, limit: int) -> HttpResponse:
        view = self.views.get(limit)
        if view is None:
            view = self.views[limit] = self.factory(limit)
        return view(request, limit=limit)


class SmartView(BenchView):
    """No DRF throttle: django-smart-ratelimit's middleware limits ``/smart/`` paths."""


class SmartRatelimitMiddleware:
    """django-smart-ratelimit's middleware, applied to ``/smart/`` paths only (it would
    otherwise limit every request at its ``DEFAULT_RATE``). Every request pays the one
    ``startswith`` here, the baseline's too."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        from django_smart_ratelimit.middleware import RateLimitMiddleware

        self.get_response = get_response
        self.smart = RateLimitMiddleware(get_response)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(SMART_PREFIX):
            return self.smart(request)
        return self.get_response(request)
