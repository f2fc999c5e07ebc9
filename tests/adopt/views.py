"""DRF views throttled as DRF users throttle them, for the adoption tests: two views under
``DEFAULT_THROTTLE_CLASSES``, two sharing a ``throttle_scope``, one with a throttle subclass
of its own rate, one with a custom throttle, one anonymous-only, one under the user
throttle alone, one unthrottled."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response
from rest_framework.throttling import (
    AnonRateThrottle,
    BaseThrottle,
    ScopedRateThrottle,
    UserRateThrottle,
)
from rest_framework.views import APIView

#: DRF's DEFAULT_THROTTLE_RATES for these tests (patched into SimpleRateThrottle, which
#: binds the setting when DRF is imported).
RATES = {"user": "3/min", "anon": "4/min", "uploads": "2/minute"}


class Ok(APIView):
    def get(self, request: Any) -> Response:
        return Response({"ok": True})


class Items(Ok):
    """Under DEFAULT_THROTTLE_CLASSES."""


class Orders(Ok):
    """Under DEFAULT_THROTTLE_CLASSES too: DRF's user counter is shared with Items."""


class Uploads(Ok):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "uploads"


class Reports(Ok):
    """Scoped like Uploads: one counter for both."""

    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "uploads"


class BurstThrottle(UserRateThrottle):
    scope = "burst"
    rate = "2/min"


class Burst(Ok):
    throttle_classes = [BurstThrottle]


class EveryOtherThrottle(BaseThrottle):
    """A throttle of its own code: ratelimits cannot know what it admits."""

    def allow_request(self, request: Any, view: Any) -> bool:
        return True


class Custom(Ok):
    throttle_classes = [EveryOtherThrottle]


class Anonymous(Ok):
    throttle_classes = [AnonRateThrottle]


class Profile(Ok):
    """Under the user throttle alone: signed-in or not, DRF counts by user or address."""

    throttle_classes = [UserRateThrottle]


class Open(Ok):
    throttle_classes: list[Any] = []
