"""The values the admin suggests for a policy's endpoint: URL names, then scopes."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import get_resolver

from ratelimits.http.view_asks import scope_of
from ratelimits.tools.endpoints.urlconf import (
    initkwargs,
    is_name,
    methods,
    ninja_operations,
    view_class_of,
    walk,
)


@dataclass(frozen=True, slots=True)
class Suggestion:
    value: str
    label: str


def suggestions(urlconf: str | None = None) -> list[Suggestion]:
    """URL names (``api:login``, ``login``, ``ninja:items``), then the scopes found in the
    URLconf (``throttle_scope``, ``ratelimit(scope=...)``, ``PolicyThrottle(scope=...)``).
    A URL is labelled by its path as a person reads it (``/api/products/<pk>/``), never
    by its regex."""
    names: dict[str, str] = {}
    scopes: dict[str, str] = {}
    for entry in walk(get_resolver(urlconf)):
        if entry.hidden:
            continue
        callback = entry.pattern.callback
        where = entry.route.path or "a regex route"
        operations = ninja_operations(callback)
        if entry.name:
            if operations:
                names.setdefault(entry.name, f"django-ninja {methods(operations)} {where}")
            else:
                names.setdefault(entry.name, f"URL name of {where}")
        view_class = view_class_of(callback)
        scope = getattr(view_class, "throttle_scope", None)
        if is_name(scope):
            scopes.setdefault(scope, f"throttle_scope of {view_class.__name__}")
        scope = initkwargs(callback).get("throttle_scope")
        if is_name(scope):
            scopes.setdefault(scope, f"throttle_scope of {where}")
        scope = scope_of(callback)  # the decorator's, on a view or its dispatch()
        if is_name(scope):
            view_name = getattr(view_class or callback, "__name__", where)
            scopes.setdefault(scope, f"ratelimit(scope=...) on {view_name}")
        for operation in operations:
            for throttle in getattr(operation, "throttle_objects", None) or ():
                scope = getattr(throttle, "ratelimit_scope", None)
                if is_name(scope):
                    on = f"{methods([operation])} {where}"
                    scopes.setdefault(scope, f"{type(throttle).__name__}(scope=...) on {on}")
    found = [Suggestion(value, label) for value, label in sorted(names.items())]
    found += [Suggestion(value, label) for value, label in sorted(scopes.items())]
    return found
