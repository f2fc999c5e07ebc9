"""What a policy's ``endpoint`` can name in this project: URL names and DRF throttle scopes.

Used by the admin to suggest values; a path glob can always be typed instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver

#: URL namespaces that are never rate-limited API endpoints (``ratelimits``: the metrics
#: view, a plain Django view that ``PolicyThrottle`` never sees).
SKIPPED_NAMESPACES = frozenset({"admin", "ratelimits"})


@dataclass(frozen=True, slots=True)
class Suggestion:
    value: str
    label: str


def suggestions(urlconf: str | None = None) -> list[Suggestion]:
    """URL names (``api:login``) and ``throttle_scope`` values found in the URLconf."""
    names: dict[str, str] = {}
    scopes: dict[str, str] = {}
    for namespaces, route, pattern in _walk(get_resolver(urlconf).url_patterns, (), ""):
        if pattern.name:
            names.setdefault(":".join((*namespaces, pattern.name)), f"URL name of /{route}")
        view_class = getattr(pattern.callback, "cls", None) or getattr(
            pattern.callback, "view_class", None
        )
        scope = getattr(view_class, "throttle_scope", None)
        if isinstance(scope, str) and scope:
            scopes.setdefault(scope, f"throttle_scope of {view_class.__name__}")
    found = [Suggestion(value, label) for value, label in sorted(names.items())]
    found += [Suggestion(value, label) for value, label in sorted(scopes.items())]
    return found


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
