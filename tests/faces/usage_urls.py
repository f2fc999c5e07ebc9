"""The usage endpoint as a project mounts it (``include("ratelimits.urls")``), the same
JSON from a django-ninja operation behind an API key, and views to spend on: a plain
view, a DRF view behind a token, a django-ninja operation behind a key. For
``tests/faces/test_usage.py``."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path
from ninja import NinjaAPI
from ninja.security import APIKeyHeader
from rest_framework.authentication import TokenAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView

from ratelimits.contrib.ninja import PolicyThrottle
from ratelimits.throttling import PolicyThrottle as DRFPolicyThrottle
from ratelimits.usage import usage_response

#: The API keys the ninja API accepts (each is its own principal).
KEYS = frozenset({"key-one", "key-two"})


class ApiKey(APIKeyHeader):
    param_name = "X-API-Key"

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        return key if key in KEYS else None


api = NinjaAPI(urls_namespace="usage-ninja", throttle=[PolicyThrottle()])


@api.get("/spend", auth=ApiKey())
def ninja_spend(request: HttpRequest) -> dict[str, str]:
    return {"spent": "ninja"}


@api.get("/usage", auth=ApiKey())
def ninja_usage(request: HttpRequest) -> JsonResponse:
    return usage_response(request)


def spend(request: HttpRequest) -> HttpResponse:
    return HttpResponse("spent")


class TokenSpend(APIView):
    authentication_classes = [TokenAuthentication]
    throttle_classes = [DRFPolicyThrottle]

    def get(self, request: Any) -> Response:
        return Response({"spent": "token"})


urlpatterns = [
    path("ratelimits/", include("ratelimits.urls")),
    path("ninja/", api.urls),
    path("spend/", spend, name="spend"),
    path("drf/spend/", TokenSpend.as_view(), name="drf-spend"),
]
