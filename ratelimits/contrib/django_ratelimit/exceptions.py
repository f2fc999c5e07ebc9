"""``Ratelimited``: django-ratelimit's own class when it is installed (so an
``except Ratelimited`` or its middleware written for it still catches it), else a
compatible one, a ``PermissionDenied`` (Django answers it with a 403)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.utils.module_loading import import_string

try:
    from django_ratelimit.exceptions import Ratelimited
except ImportError:

    class Ratelimited(PermissionDenied):  # type: ignore[no-redef]
        """A request over its limit, raised by a view's ``@ratelimit`` when it blocks
        by raising (``RATELIMITS["DJANGO_RATELIMIT_BLOCK"] = "raise"``)."""


__all__ = ["Ratelimited", "configured_exception", "exception_class"]


def configured_exception() -> Any:
    """django-ratelimit's ``RATELIMIT_EXCEPTION_CLASS`` (a class, or its dotted path,
    imported), or ``None`` when the project does not set it."""
    found = getattr(settings, "RATELIMIT_EXCEPTION_CLASS", None)
    if found is None:
        return None
    return import_string(found) if isinstance(found, str) else found


def exception_class() -> Any:
    """What a blocked request raises: :func:`configured_exception`, else
    :class:`Ratelimited`."""
    return configured_exception() or Ratelimited
