"""What a policy's ``endpoint`` can name in this project: URL names (plain Django views
and django-ninja operations alike) and scopes (DRF's ``throttle_scope``, the
``ratelimit(scope=...)`` decorator's, django-ninja's ``PolicyThrottle(scope=...)``).

Used by the admin to suggest values; a path glob can always be typed instead. django-ninja
is never imported here: its operations are looked for only when the URLconf loaded it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver

from ratelimits.http.gate import scope_of

#: URL namespaces that are never rate-limited API endpoints (``ratelimits``: the metrics
#: view, a plain Django view that ``PolicyThrottle`` never sees).
SKIPPED_NAMESPACES = frozenset({"admin", "ratelimits"})


@dataclass(frozen=True, slots=True)
class Suggestion:
    value: str
    label: str


def suggestions(urlconf: str | None = None) -> list[Suggestion]:
    """URL names (``api:login``, ``login``, ``ninja:items``), then the scopes found in the
    URLconf (``throttle_scope``, ``ratelimit(scope=...)``, ``PolicyThrottle(scope=...)``)."""
    names: dict[str, str] = {}
    scopes: dict[str, str] = {}
    for namespaces, route, pattern in _walk(get_resolver(urlconf).url_patterns, (), ""):
        callback = pattern.callback
        operations = _ninja_operations(callback)
        if pattern.name:
            name = ":".join((*namespaces, pattern.name))
            if operations:
                names.setdefault(name, f"django-ninja {_methods(operations)} /{route}")
            else:
                names.setdefault(name, f"URL name of /{route}")
        view_class = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
        scope = getattr(view_class, "throttle_scope", None)
        if _is_name(scope):
            scopes.setdefault(scope, f"throttle_scope of {view_class.__name__}")
        scope = scope_of(callback)  # the decorator's, on a view or its dispatch()
        if _is_name(scope):
            view_name = getattr(view_class or callback, "__name__", f"/{route}")
            scopes.setdefault(scope, f"ratelimit(scope=...) on {view_name}")
        for operation in operations:
            for throttle in getattr(operation, "throttle_objects", None) or ():
                scope = getattr(throttle, "ratelimit_scope", None)
                if _is_name(scope):
                    where = f"{_methods([operation])} /{route}"
                    scopes.setdefault(scope, f"{type(throttle).__name__}(scope=...) on {where}")
    found = [Suggestion(value, label) for value, label in sorted(names.items())]
    found += [Suggestion(value, label) for value, label in sorted(scopes.items())]
    return found


def _is_name(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _ninja_operations(callback: Any) -> list[Any]:
    """The django-ninja operations behind a URL pattern's view (none for another view, and
    whenever django-ninja is not loaded). Its path views serve a closure over themselves
    (django-ninja 1.5+) or a bound method (earlier)."""
    if "ninja" not in sys.modules:
        return []
    holders = [getattr(callback, "__self__", None)]
    holders += [cell.cell_contents for cell in getattr(callback, "__closure__", None) or ()]
    for holder in holders:
        if type(holder).__module__.startswith("ninja."):
            operations = getattr(holder, "operations", None)
            if isinstance(operations, list):
                return operations
    return []


def _methods(operations: Iterable[Any]) -> str:
    return ", ".join(method for operation in operations for method in operation.methods)


def _walk(
    patterns: Iterable[URLPattern | URLResolver], namespaces: tuple[str, ...], prefix: str
) -> Iterable[tuple[tuple[str, ...], str, URLPattern]]:
    for entry in patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            if entry.namespace in SKIPPED_NAMESPACES:
                continue
            inner = (*namespaces, entry.namespace) if entry.namespace else namespaces
            yield from _walk(entry.url_patterns, inner, route)
        else:
            yield namespaces, route, entry
