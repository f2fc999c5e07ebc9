"""Views adoption must leave alone or read with care: the user throttle on two views next
to a scoped one under one path prefix (no glob matches just those two; their URL names,
listed, do), a subclass with code of its own, two throttles on one scope at different
rates."""

from typing import Any

from django.urls import path
from rest_framework.throttling import ScopedRateThrottle, UserRateThrottle

from tests.adopt import views


class ByHeaderThrottle(UserRateThrottle):
    def get_cache_key(self, request: Any, view: Any) -> str:
        return f"throttle_header_{request.headers.get('X-Key')}"


class SearchThrottle(UserRateThrottle):
    scope = "search"
    rate = "5/min"


class SearchBurstThrottle(UserRateThrottle):
    scope = "search"
    rate = "1/second"


class Mixed(views.Ok):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "uploads"


class ByHeader(views.Ok):
    throttle_classes = [ByHeaderThrottle]


class Search(views.Ok):
    throttle_classes = [SearchThrottle]


class SearchBurst(views.Ok):
    throttle_classes = [SearchBurstThrottle]


urlpatterns = [
    path("api/items/", views.Items.as_view(), name="items"),
    path("api/orders/", views.Orders.as_view(), name="orders"),
    path("api/mixed/", Mixed.as_view(), name="mixed"),
    path("api/by-header/", ByHeader.as_view(), name="by-header"),
    path("api/search/", Search.as_view(), name="search"),
    path("api/search-burst/", SearchBurst.as_view(), name="search-burst"),
]
