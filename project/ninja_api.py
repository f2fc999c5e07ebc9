"""The demo's django-ninja API, mounted at ``/ninja/``: every operation under
``PolicyThrottle``. No operation mentions a limit: the ``ninja-items`` policy matches
``GET /ninja/items`` by its URL name, ``ninja:items``."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import NinjaAPI

from ratelimits.contrib.ninja import PolicyThrottle

api = NinjaAPI(
    title="ratelimits demo (django-ninja)", urls_namespace="ninja", throttle=[PolicyThrottle()]
)

ITEMS = [{"id": n, "name": f"item {n}"} for n in range(1, 6)]


@api.get("/items")
def items(request: HttpRequest) -> list[dict[str, object]]:
    """``GET /ninja/items``: under the ``ninja-items`` policy (URL name ``ninja:items``)."""
    return ITEMS
