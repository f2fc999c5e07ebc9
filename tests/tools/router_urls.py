"""A URLconf with a DRF router: regex routes, an ``@action`` with its own scope, and a
viewset with a ``throttle_scope``, for the endpoint suggestions and the unmatched-endpoint
check."""

from __future__ import annotations

from django.urls import include, path
from rest_framework import routers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from ratelimits.throttling import PolicyThrottle


class ProductViewSet(viewsets.ViewSet):
    throttle_classes = [PolicyThrottle]

    def list(self, request):
        return Response([])

    def retrieve(self, request, pk=None):
        return Response({"pk": pk})


class OrderViewSet(viewsets.ViewSet):
    throttle_classes = [PolicyThrottle]
    throttle_scope = "orders"

    def list(self, request):
        return Response([])

    @action(detail=False, throttle_scope="order-export")
    def export(self, request):
        return Response([])


router = routers.DefaultRouter()
router.register("products", ProductViewSet, basename="product")
router.register("orders", OrderViewSet, basename="order")

urlpatterns = [
    path("api/", include((router.urls, "api"))),
]
