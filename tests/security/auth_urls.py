"""Views that authenticate as real sites do, for the red-team tests of failed
authentication (``tests/security/test_authentication_failures.py``) and sign-in
protection (``tests/security/test_sign_in.py``): DRF's Basic and Token authentication,
a DRF API-key scheme that raises ``AuthenticationFailed``, DRF's ``obtain_auth_token``,
django-ninja's ``APIKeyHeader``, Django's ``LoginView`` and the admin login."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.views import LoginView
from django.http import HttpRequest
from django.urls import path
from ninja import NinjaAPI
from ninja.security import APIKeyHeader
from rest_framework.authentication import BasicAuthentication, TokenAuthentication
from rest_framework.authtoken.views import obtain_auth_token
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from ratelimits.contrib.ninja import PolicyThrottle
from tests.faces.api_clients_urls import KEYS, DRFApiKey


class NinjaKey(APIKeyHeader):
    param_name = "X-API-Key"

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        return KEYS.get(key or "")


ninja_api = NinjaAPI(urls_namespace="ninja-auth", throttle=[PolicyThrottle()])


@ninja_api.get("/keyed", auth=NinjaKey())
def ninja_keyed(request: HttpRequest) -> dict[str, str]:
    return {"view": "ninja keyed"}


@ninja_api.get("/keyed-async", auth=NinjaKey())
async def ninja_keyed_async(request: HttpRequest) -> dict[str, str]:
    return {"view": "ninja keyed async"}


class Basic(APIView):
    authentication_classes = [BasicAuthentication]
    permission_classes = [IsAuthenticated]

    def get(self, request: Any) -> Response:
        return Response({"user": request.user.get_username()})


class Token(Basic):
    authentication_classes = [TokenAuthentication]


class ApiKey(APIView):
    authentication_classes = [DRFApiKey]

    def get(self, request: Any) -> Response:
        return Response({"client": str(request.auth)})


urlpatterns = [
    path("basic/", Basic.as_view(), name="basic"),
    path("token/", Token.as_view(), name="token"),
    path("api-key/", ApiKey.as_view(), name="api-key"),
    path("obtain-token/", obtain_auth_token, name="obtain-token"),
    path("ninja/", ninja_api.urls),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("admin/", admin.site.urls),
]
