"""Plain Django views of every kind, for the middleware and decorator tests."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.urls import include, path
from django.utils.decorators import method_decorator
from django.views import View
from rest_framework.response import Response
from rest_framework.views import APIView

from ratelimits.decorators import ratelimit
from ratelimits.throttling import PolicyThrottle


def sync_view(request):
    return HttpResponse("sync")


async def async_view(request):
    return HttpResponse("async")


class ClassView(View):
    def get(self, request):
        return HttpResponse("class")

    def post(self, request):
        return HttpResponse("class post")


@ratelimit(scope="decorated")
def decorated_sync(request):
    return HttpResponse("decorated sync")


@ratelimit(scope="decorated")
async def decorated_async(request):
    return HttpResponse("decorated async")


@method_decorator(ratelimit(scope="decorated"), name="dispatch")
class DecoratedClassView(View):
    def get(self, request):
        return HttpResponse("decorated class")


@method_decorator(ratelimit(scope="monthly-reports"), name="dispatch")
class ReportsView(View):
    def get(self, request):
        return HttpResponse("reports")


@ratelimit(scope="export", cost=3)
def export(request):
    return HttpResponse("export")


@ratelimit(scope="export", cost=lambda request: int(request.GET.get("rows", "1")))
async def export_rows(request):
    return HttpResponse("rows")


@ratelimit(scope="export", cost=lambda request: int(request.GET["rows"]))
def export_broken(request):
    return HttpResponse("broken")


class HeavyView(View):
    ratelimit_cost = 4

    def get(self, request):
        return HttpResponse("heavy")


class HeavyApiView(APIView):
    throttle_classes = [PolicyThrottle]
    ratelimit_cost = 4

    def get(self, request):
        return Response({"view": "heavy api"})


class BatchApiView(APIView):
    throttle_classes = [PolicyThrottle]

    def ratelimit_cost(self, request):
        return len(request.query_params.getlist("id")) or 1

    def get(self, request):
        return Response({"view": "batch api"})


async def whoami(request):
    user = await request.auser()
    return JsonResponse({"user": user.username if user.is_authenticated else None})


urlpatterns = [
    path("sync/", sync_view, name="sync"),
    path("async/", async_view, name="async"),
    path("class/", ClassView.as_view(), name="class"),
    path("decorated/sync/", decorated_sync, name="decorated-sync"),
    path("decorated/async/", decorated_async, name="decorated-async"),
    path("decorated/class/", DecoratedClassView.as_view(), name="decorated-class"),
    path("reports/", ReportsView.as_view(), name="reports"),
    path("whoami/", whoami, name="whoami"),
    path("export/", export, name="export"),
    path("export/rows/", export_rows, name="export-rows"),
    path("export/broken/", export_broken, name="export-broken"),
    path("heavy/", HeavyView.as_view(), name="heavy"),
    path("heavy-api/", HeavyApiView.as_view(), name="heavy-api"),
    path("batch-api/", BatchApiView.as_view(), name="batch-api"),
    path("api/", include("project.api.urls")),
]
