"""API clients that authenticate as something other than a session: django-ninja's
``APIKeyHeader`` (a key string, or the user it belongs to), DRF's ``TokenAuthentication``
and a DRF authentication that returns an API key instead of a user. For
``tests/faces/test_api_clients.py``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest
from django.urls import path
from ninja import NinjaAPI
from ninja.security import APIKeyHeader
from rest_framework.authentication import BaseAuthentication, TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.response import Response
from rest_framework.views import APIView

from ratelimits.contrib.ninja import PolicyThrottle
from ratelimits.throttling import PolicyThrottle as DRFPolicyThrottle

#: The API keys the test APIs accept: key -> the principal it authenticates as.
KEYS = {"key-one": "key-one", "key-two": "key-two"}


class KeyString(APIKeyHeader):
    """ninja's API-key auth, as its docs write it: the key string is the principal."""

    param_name = "X-API-Key"

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        return KEYS.get(key or "")


class KeyOfUser(APIKeyHeader):
    """An API key that belongs to a user (``user:<username>``): the principal is the user."""

    param_name = "X-API-Key"

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        if key and key.startswith("user:"):
            return User.objects.filter(username=key.removeprefix("user:")).first()
        return None


api = NinjaAPI(urls_namespace="clients", throttle=[PolicyThrottle()])


@api.get("/keyed", auth=KeyString())
def keyed(request: HttpRequest) -> dict[str, str]:
    return {"view": "keyed"}


@api.get("/keyed-async", auth=KeyString())
async def keyed_async(request: HttpRequest) -> dict[str, str]:
    return {"view": "keyed async"}


@api.get("/user-key", auth=KeyOfUser())
def user_key(request: HttpRequest) -> dict[str, str]:
    return {"view": "user key"}


@api.get("/open")
def open_operation(request: HttpRequest) -> dict[str, str]:
    return {"view": "open"}


class DRFApiKey(BaseAuthentication):
    """A DRF authentication that returns ``(None, key)``: an API client, not a user."""

    def authenticate(self, request: Any) -> tuple[None, str] | None:
        key = request.META.get("HTTP_X_API_KEY")
        if key is None:
            return None
        if key not in KEYS:
            raise AuthenticationFailed("unknown key")
        return None, KEYS[key]


class DRFTokenView(APIView):
    authentication_classes = [TokenAuthentication]
    throttle_classes = [DRFPolicyThrottle]

    def get(self, request: Any) -> Response:
        return Response({"view": "token"})


class DRFKeyView(APIView):
    authentication_classes = [DRFApiKey]
    throttle_classes = [DRFPolicyThrottle]

    def get(self, request: Any) -> Response:
        return Response({"view": "drf key"})


urlpatterns = [
    path("clients/", api.urls),
    path("drf/token/", DRFTokenView.as_view(), name="drf-token"),
    path("drf/key/", DRFKeyView.as_view(), name="drf-key"),
]
