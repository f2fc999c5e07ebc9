"""The benchmark's URLs: one path per limiter, the limit in the path (see
:mod:`bench.views`). Every path is one level deep with one converter, so URL resolution
costs about the same for each."""

from __future__ import annotations

import functools

from django.urls import path
from ninja import NinjaAPI
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle

from bench import views
from ratelimits.contrib.ninja import PolicyThrottle

#: An async django-ninja operation under the ninja PolicyThrottle, and its unthrottled twin
#: (:mod:`bench.asyncpath`): django-ninja calls a throttle synchronously on the loop.
ninja_api = NinjaAPI(urls_namespace="bench-ninja")


@ninja_api.get("/throttled/{limit}", throttle=PolicyThrottle())
async def ninja_throttled(request: views.HttpRequest, limit: int) -> dict[str, str]:
    return views.BODY


@ninja_api.get("/plain/{limit}", throttle=[])
async def ninja_plain(request: views.HttpRequest, limit: int) -> dict[str, str]:
    return views.BODY


urlpatterns = [
    path("none/<int:limit>/", views.UnthrottledView.as_view()),
    path("policy/<slug:scope>/", views.PolicyView.as_view()),
    path(
        "drf-anon/<int:limit>/",
        views.PerLimit(functools.partial(views.drf_throttle_view, AnonRateThrottle)),
    ),
    path(
        "drf-user/<int:limit>/",
        views.PerLimit(functools.partial(views.drf_throttle_view, UserRateThrottle)),
    ),
    path("djrl/<int:limit>/", views.PerLimit(views.django_ratelimit_view)),
    path(
        "limits-moving/<int:limit>/", views.PerLimit(functools.partial(views.limits_view, "moving"))
    ),
    path(
        "limits-counter/<int:limit>/",
        views.PerLimit(functools.partial(views.limits_view, "counter")),
    ),
    path("smart/<int:limit>/", views.SmartView.as_view()),
    # Plain Django views: the middleware face (a policy's glob matches mw-*), its twins.
    path("plain-sync/<int:limit>/", views.plain_view),
    path("plain-async/<int:limit>/", views.plain_async_view),
    path("mw-sync/<int:limit>/", views.plain_view),
    path("mw-async/<int:limit>/", views.plain_async_view),
    path("limits-aio/<int:limit>/", views.limits_aio_view),
    path("ninja/", ninja_api.urls),
]
