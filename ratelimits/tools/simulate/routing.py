"""Which policies a log line meets: its path resolved through the site's URLconf for the
URL name and the view's scope (DRF's ``throttle_scope``, ``ratelimit(scope=...)``,
django-ninja's ``PolicyThrottle(scope=...)``), then matched as a live request is (names,
path globs, methods)."""

from __future__ import annotations

import functools
from typing import Any

from django.urls import Resolver404, resolve

from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.table.policy_table import PolicyTable
from ratelimits.http.view_asks import scope_of
from ratelimits.tools.endpoints.urlconf import (
    initkwargs,
    is_name,
    ninja_operations,
    view_class_of,
)

#: Distinct (method, path) pairs remembered (paths with ids in them are many).
CACHED = 65536


@functools.lru_cache(maxsize=CACHED)
def view_names(method: str, path: str) -> tuple[str | None, str | None]:
    """``(scope, url name)`` of a request for ``path``, as the faces find them."""
    try:
        match = resolve(path)
    except (Resolver404, ValueError, TypeError):
        return None, None
    except Exception:  # a URLconf's own converter that raised: the path matches nothing
        return None, None
    callback = match.func
    scope = _scope(callback, method)
    return scope, match.view_name or None


def _scope(callback: Any, method: str) -> str | None:
    for found in (
        getattr(view_class_of(callback), "throttle_scope", None),
        initkwargs(callback).get("throttle_scope"),
        scope_of(callback),
        _ninja_scope(callback, method),
    ):
        if is_name(found):
            return str(found)
    return None


def _ninja_scope(callback: Any, method: str) -> str | None:
    """The scope of the ``PolicyThrottle`` on the django-ninja operation for ``method``."""
    for operation in ninja_operations(callback):
        if method not in getattr(operation, "methods", ()):
            continue
        for throttle in getattr(operation, "throttle_objects", None) or ():
            if type(throttle).__name__ == "PolicyThrottle":
                return getattr(throttle, "scope", None)
    return None


def matching(table: PolicyTable, method: str, path: str) -> list[CompiledPolicy]:
    """The policies of ``table`` a request ``method path`` meets."""
    scope, url_name = view_names(method, path)
    return table.match(method=method, path=path, scope=scope, url_name=url_name)
