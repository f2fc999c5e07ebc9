"""django-ratelimit's ``RatelimitMiddleware``: a ``Ratelimited`` a view raised (with
``RATELIMITS["DJANGO_RATELIMIT_BLOCK"] = "raise"``) answered by the view
``RATELIMIT_VIEW`` names, ``(request, exception) -> response``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from ratelimits.contrib.django_ratelimit.exceptions import Ratelimited

__all__ = ["RatelimitMiddleware"]


class RatelimitMiddleware:
    """Renders ``RATELIMIT_VIEW`` for a ``Ratelimited``; every other exception goes on."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: Any) -> Any:
        if iscoroutinefunction(self):
            return self.__acall__(request)
        return self.get_response(request)

    async def __acall__(self, request: Any) -> Any:
        return await self.get_response(request)

    def process_exception(self, request: Any, exception: Exception) -> Any:
        """``RATELIMIT_VIEW``'s response to a ``Ratelimited``; ``None`` for another
        exception (Django goes on with it)."""
        if not isinstance(exception, Ratelimited):
            return None
        path = getattr(settings, "RATELIMIT_VIEW", None)
        if not path:
            raise ImproperlyConfigured(
                "RatelimitMiddleware needs RATELIMIT_VIEW, the dotted path of a view "
                "(request, exception) answering a Ratelimited."
            )
        view = import_string(path)
        return view(request, exception)
