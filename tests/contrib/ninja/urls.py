"""A django-ninja API under PolicyThrottle at every level, for the ninja face tests."""

from __future__ import annotations

from django.http import HttpRequest
from django.urls import path
from ninja import NinjaAPI, Router
from ninja.errors import HttpError

from ratelimits.contrib.ninja import PolicyThrottle

api = NinjaAPI(urls_namespace="faces-ninja", throttle=[PolicyThrottle()])

#: Operation-level: replaces the API's throttle for this operation.
SCOPED = PolicyThrottle(scope="scoped")


@api.get("/plain")
def plain(request: HttpRequest) -> dict[str, str]:
    return {"view": "plain"}


@api.get("/scoped", throttle=SCOPED)
def scoped(request: HttpRequest) -> dict[str, str]:
    return {"view": "scoped"}


@api.get("/async")
async def async_items(request: HttpRequest) -> dict[str, str]:
    return {"view": "async"}


@api.get("/async-scoped", throttle=PolicyThrottle(scope="async-scoped"))
async def async_scoped(request: HttpRequest) -> dict[str, str]:
    return {"view": "async scoped"}


@api.get("/batch", throttle=PolicyThrottle(scope="batch", cost=lambda r: int(r.GET["n"])))
def batch(request: HttpRequest) -> dict[str, str]:
    return {"view": "batch"}


@api.get("/status", throttle=PolicyThrottle(scope="status"))
def answers_status(request: HttpRequest, status: int = 200) -> dict[str, int]:
    """Answers 200 with the concurrency slots held while it ran, or the error asked for."""
    from tests.faces.after_urls import in_flight

    if status >= 400:
        raise HttpError(status, "as asked")
    return {"in_flight": in_flight()}


@api.get("/unthrottled", throttle=[])
def unthrottled(request: HttpRequest) -> dict[str, str]:
    return {"view": "unthrottled"}


#: Router-level: every operation of the router counts against the "routed" policies.
router = Router(throttle=PolicyThrottle(scope="routed"))


@router.get("/a")
def routed_a(request: HttpRequest) -> dict[str, str]:
    return {"view": "a"}


@router.get("/b")
def routed_b(request: HttpRequest) -> dict[str, str]:
    return {"view": "b"}


api.add_router("/router", router)

urlpatterns = [path("ninja-test/", api.urls)]
