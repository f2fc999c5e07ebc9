"""Views and requests for the django-ratelimit tests: each scenario runs on a sync and on
an async function view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from django.test import RequestFactory

from ratelimits.contrib.django_ratelimit import ratelimit

rf = RequestFactory()


class MockUser:
    """django-ratelimit's test user: pk 1, authenticated or not."""

    def __init__(self, authenticated: bool = False) -> None:
        self.pk = 1
        self.is_authenticated = authenticated


def limited_view(kind: str, *stack: dict[str, Any]) -> Callable[[Any], Any]:
    """A view returning ``request.limited`` under one ``@ratelimit(**kwargs)`` per item of
    ``stack`` (the first outermost), as a plain callable whatever ``kind`` (sync, async)."""
    if kind == "async":

        async def view(request: Any) -> Any:
            return request.limited

        decorated: Any = view
    else:

        def plain(request: Any) -> Any:
            return request.limited

        decorated = plain
    for kwargs in reversed(stack):
        decorated = ratelimit(**kwargs)(decorated)
    return async_to_sync(decorated) if kind == "async" else decorated


def request(method: str = "get", address: str | None = None, **meta: Any) -> Any:
    """A request from ``address`` (RequestFactory's 127.0.0.1 when None)."""
    made = getattr(rf, method)("/")
    if address is not None:
        made.META["REMOTE_ADDR"] = address
    made.META.update(meta)
    return made


def user_request(authenticated: bool) -> Any:
    made = rf.post("/")
    made.user = MockUser(authenticated=authenticated)
    return made
