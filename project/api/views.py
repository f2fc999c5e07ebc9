"""The demo API. No view mentions a limit: the policies in the database do. (Except
DrfAnonView, DRF's own throttle, kept for comparison.)"""

import time

from django.contrib.auth import authenticate
from django.utils import timezone
from rest_framework import permissions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

ITEMS = [{"id": n, "name": f"item {n}"} for n in range(1, 6)]


class SearchView(APIView):
    """GET /api/search/?q=...; matched by its throttle_scope, "search"."""

    throttle_scope = "search"

    def get(self, request: Request) -> Response:
        query = request.query_params.get("q", "")
        return Response({"query": query, "results": [i for i in ITEMS if query in i["name"]]})


class LoginView(APIView):
    """POST /api/login/ with username and password; matched by its URL name, "api:login".

    Its policy counts failures only: a wrong password (400) spends, a sign-in does not."""

    authentication_classes: list = []

    def post(self, request: Request) -> Response:
        user = authenticate(
            request, username=request.data.get("username"), password=request.data.get("password")
        )
        if user is None:
            return Response({"detail": "Wrong username or password."}, status.HTTP_400_BAD_REQUEST)
        return Response({"detail": f"Welcome, {user.get_username()}."})


class PaymentView(APIView):
    """POST /api/payment/ (signed in); matched by the path glob "/api/payment/*"."""

    permission_classes = [permissions.IsAuthenticated]

    def post(self, request: Request) -> Response:
        return Response({"detail": "Payment accepted.", "amount": request.data.get("amount")})


class ItemsView(APIView):
    """GET /api/items/; matched by its URL name, "api:items"."""

    def get(self, request: Request) -> Response:
        return Response({"items": ITEMS})


class ReportView(APIView):
    """GET /api/report/: a report that takes about 300 ms to build; matched by its URL
    name, "api:report", under a concurrency policy (requests in progress at once)."""

    #: Seconds the report takes to build.
    BUILD_SECONDS = 0.3

    def get(self, request: Request) -> Response:
        started = timezone.now()
        time.sleep(self.BUILD_SECONDS)
        return Response({"report": "items", "count": len(ITEMS), "built_at": started.isoformat()})


class FiftyPerMinuteAnonThrottle(AnonRateThrottle):
    """DRF's own anonymous throttle at 50 per minute, in DRF's default cache."""

    rate = "50/min"


class DrfAnonView(APIView):
    """GET /api/drf-anon/: throttled by DRF's AnonRateThrottle, not by a policy; for
    comparing its admission under load with PolicyThrottle's
    (tests/integration/test_gunicorn.py)."""

    throttle_classes = [FiftyPerMinuteAnonThrottle]

    def get(self, request: Request) -> Response:
        return Response({"items": ITEMS})
