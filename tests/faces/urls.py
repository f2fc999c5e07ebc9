"""Plain Django views of every kind, for the middleware and decorator tests."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.urls import include, path
from django.utils.decorators import method_decorator
from django.views import View

from ratelimits.decorators import ratelimit


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
    path("api/", include("project.api.urls")),
]
