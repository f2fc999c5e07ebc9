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


def exception_class() -> Any:
    """What a blocked request raises: django-ratelimit's ``RATELIMIT_EXCEPTION_CLASS`` (a
    class or its dotted path) when the project sets it, else :class:`Ratelimited`."""
    found = getattr(settings, "RATELIMIT_EXCEPTION_CLASS", Ratelimited)
    return import_string(found) if isinstance(found, str) else found
