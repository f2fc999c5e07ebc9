"""The shapes of two real DRF projects, for the adoption tests: a shop API whose view sets
``throttle_scope = "user"`` under both the user and the scoped throttle (DRF spends two of
``throttle_user_<id>`` per request), a finance API with burst and sustained throttles on
each view at the root of the site, and a view left on DRF (it overrides
``get_throttles()``) that shares the anonymous counter with another. Each site is a
URLconf module made here, before adoption and after the switch."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from django.http import HttpResponse
from django.urls import path
from rest_framework.response import Response
from rest_framework.throttling import (
    AnonRateThrottle,
    ScopedRateThrottle,
    UserRateThrottle,
)
from rest_framework.urlpatterns import format_suffix_patterns

from ratelimits.throttling import PolicyThrottle
from tests.adopt.views import Ok

ADOPTED = {"throttle_classes": [PolicyThrottle]}


def urlconf(name: str, patterns: list[Any]) -> ModuleType:
    """A URLconf module holding ``patterns`` (``ROOT_URLCONF`` accepts a module)."""
    module = ModuleType(f"tests.adopt.projects.{name}")
    module.urlpatterns = patterns  # type: ignore[attr-defined]
    return module


# The shop: DEFAULT_THROTTLE_CLASSES = [UserRateThrottle, ScopedRateThrottle].
SHOP_RATES = {"user": "4/min", "uploads": "2/min"}


class Cart(Ok):
    """``throttle_scope = "user"``: the scoped throttle keeps the user throttle's counter."""

    throttle_scope = "user"


class Items(Ok):
    """Under the default throttles, without a scope: the user throttle alone counts."""


class Uploads(Ok):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "uploads"


def shop(*, items: bool, adopted: set[str]) -> ModuleType:
    """The shop's URLconf: the cart and uploads (and the items view with ``items``); the
    views named in ``adopted`` under PolicyThrottle, the others with their DRF throttles
    written out (after the switch DEFAULT_THROTTLE_CLASSES is PolicyThrottle)."""
    on_drf = {"throttle_classes": [UserRateThrottle, ScopedRateThrottle]}
    patterns = [
        path("api/cart/", Cart.as_view(**(ADOPTED if "cart" in adopted else on_drf)), name="cart"),
        path("api/uploads/", Uploads.as_view(**_adopted("uploads", adopted)), name="uploads"),
    ]
    if items:
        kept = {"throttle_classes": [UserRateThrottle]}
        view = Items.as_view(**(ADOPTED if "items" in adopted else kept))
        patterns.append(path("api/items/", view, name="items"))
    return urlconf("shop", patterns)


# The finance API: burst and sustained throttles on each view, at the root of the site.
FINANCE_RATES = {"user": "5/min"}


class BurstRateThrottle(UserRateThrottle):
    scope = "burst"
    rate = "2/min"


class SustainedRateThrottle(UserRateThrottle):
    scope = "sustained"
    rate = "3/hour"


class Formatted(Ok):
    """Served with DRF's format suffixes too (``/accounts.json``)."""

    def get(self, request: Any, format: str | None = None) -> Response:
        return Response({"ok": True})


class Accounts(Formatted):
    throttle_classes = [BurstRateThrottle, SustainedRateThrottle]


class Transactions(Formatted):
    throttle_classes = [BurstRateThrottle, SustainedRateThrottle]


class Status(Formatted):
    """Under DEFAULT_THROTTLE_CLASSES = [UserRateThrottle], at the root too."""


def health(request: Any) -> HttpResponse:
    """A plain Django view at the root: no throttle."""
    return HttpResponse("ok")


def finance(*, adopted: bool) -> ModuleType:
    """The finance URLconf, with DRF's format suffixes (``/accounts.json``) as a router
    adds them; after the switch (``adopted``) every view is under PolicyThrottle."""
    given = ADOPTED if adopted else {}
    patterns = format_suffix_patterns(
        [
            path("accounts/", Accounts.as_view(**given), name="accounts"),
            path("transactions/", Transactions.as_view(**given), name="transactions"),
            path("status/", Status.as_view(**given), name="status"),
        ]
    )
    return urlconf("finance", [*patterns, path("health/", health, name="health")])


# A view left on DRF that shares the anonymous counter with another view.
SHARED_RATES = {"anon": "3/min", "uploads": "2/min"}


class Public(Ok):
    """Under DEFAULT_THROTTLE_CLASSES = [AnonRateThrottle]."""


class Legacy(Ok):
    """Chooses its throttles per request: adoption cannot read them, and leaves it on DRF."""

    throttle_classes = [AnonRateThrottle]

    def get_throttles(self) -> list[Any]:
        return [AnonRateThrottle()]


def shared(*, adopted: set[str]) -> ModuleType:
    """The public view (its anonymous throttle written out unless adopted), the legacy
    view (always on DRF) and uploads."""
    kept = {"throttle_classes": [AnonRateThrottle]}
    return urlconf(
        "shared",
        [
            path(
                "api/public/",
                Public.as_view(**(ADOPTED if "public" in adopted else kept)),
                name="public",
            ),
            path("api/legacy/", Legacy.as_view(), name="legacy"),
            path("api/uploads/", Uploads.as_view(**_adopted("uploads", adopted)), name="uploads"),
        ],
    )


def _adopted(name: str, adopted: set[str]) -> dict[str, Any]:
    return ADOPTED if name in adopted else {}
