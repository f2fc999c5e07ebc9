"""Views that report the concurrency slots in use while they run, through every face,
answering the status ``?status=`` asks for (the after-response tests)."""

from __future__ import annotations

from collections.abc import Iterator

from django.http import HttpResponse, StreamingHttpResponse
from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from ratelimits.conf import app_settings
from ratelimits.decorators import ratelimit
from ratelimits.engine.store import connection
from ratelimits.throttling import PolicyThrottle


def in_flight() -> int:
    """Units held now in every concurrency key (leases not yet ended)."""
    client = connection.get_client()
    keys = client.keys(f"{app_settings.KEY_PREFIX}:*:leases")
    # Leases are scored by when they end (positive); the running total "#" by minus the
    # units held (zero or less), so it is left out.
    return sum(int(client.zcount(key, "(0", "+inf")) for key in keys)


def _status(request) -> int:
    return int(request.GET.get("status", "200"))


def plain(request):
    return HttpResponse(str(in_flight()), status=_status(request))


async def plain_async(request):
    from asgiref.sync import sync_to_async

    return HttpResponse(str(await sync_to_async(in_flight)()), status=_status(request))


@ratelimit(scope="after")
def decorated(request):
    return HttpResponse(str(in_flight()), status=_status(request))


@ratelimit(scope="after")
async def decorated_async(request):
    from asgiref.sync import sync_to_async

    return HttpResponse(str(await sync_to_async(in_flight)()), status=_status(request))


@ratelimit(scope="after")
def decorated_raises(request):
    raise RuntimeError("the view failed")


def raises(request):
    raise RuntimeError("the view failed")


def streams(request):
    def chunks() -> Iterator[str]:
        for _ in range(3):
            yield f"{in_flight()},"

    return StreamingHttpResponse(chunks())


class Drf(APIView):
    throttle_classes = [PolicyThrottle]
    throttle_scope = "after"

    def get(self, request):
        return Response(in_flight(), status=_status(request))


class DrfRaises(APIView):
    throttle_classes = [PolicyThrottle]
    throttle_scope = "after"

    def get(self, request):
        raise RuntimeError("the view failed")


urlpatterns = [
    path("plain/", plain, name="plain"),
    path("plain-async/", plain_async, name="plain-async"),
    path("decorated/", decorated, name="decorated"),
    path("decorated-async/", decorated_async, name="decorated-async"),
    path("decorated-raises/", decorated_raises, name="decorated-raises"),
    path("raises/", raises, name="raises"),
    path("streams/", streams, name="streams"),
    path("drf/", Drf.as_view(), name="drf"),
    path("drf-raises/", DrfRaises.as_view(), name="drf-raises"),
]
