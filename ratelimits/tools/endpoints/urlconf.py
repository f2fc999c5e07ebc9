"""The URLconf, walked: every URL pattern with its full path, its name under its namespaces,
and the views' scopes as the faces read them."""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.urls import URLPattern, URLResolver
from django.utils.regex_helper import normalize

#: URL namespaces that are never rate-limited API endpoints (``ratelimits``: the metrics
#: view, a plain Django view that ``PolicyThrottle`` never sees). Not suggested; a policy
#: naming one of their URLs still matches it.
SKIPPED_NAMESPACES = frozenset({"admin", "ratelimits"})

#: Values tried in a URL's parameters: a number, a word, a format suffix (DRF's, with and
#: without its dot), a UUID. A path made with them counts only when the URL's regex
#: matches it.
PARAMETER_SAMPLES = ("1", "a", "json", ".json", "00000000-0000-0000-0000-000000000000")


@dataclass(frozen=True, slots=True)
class Route:
    """One URL pattern's full path: as a person reads it (``/api/items/<pk>/``) and as a
    glob (``/api/items/*/``), empty when Django cannot read its regex (one with ``|``);
    its full regex (``None`` when the joined regexes do not compile); and paths it serves,
    with sample values in its parameters."""

    path: str
    glob: str
    regex: re.Pattern[str] | None
    samples: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Entry:
    """One URL pattern as walked: its name under its namespaces, and its full route."""

    name: str | None
    route: Route
    pattern: URLPattern
    #: Under a namespace that is not suggested (:data:`SKIPPED_NAMESPACES`).
    hidden: bool


def walk(resolver: URLResolver) -> Iterable[Entry]:
    """Every URL pattern under ``resolver``, with its full route and namespaced name."""
    yield from _walk_patterns(resolver.url_patterns, (), (resolver.pattern.regex.pattern,), False)


def _walk_patterns(
    patterns: Iterable[URLPattern | URLResolver],
    namespaces: tuple[str, ...],
    regexes: tuple[str, ...],
    hidden: bool,
) -> Iterable[Entry]:
    for entry in patterns:
        inner = (*regexes, entry.pattern.regex.pattern)
        if isinstance(entry, URLResolver):
            spaces = (*namespaces, entry.namespace) if entry.namespace else namespaces
            skipped = hidden or entry.namespace in SKIPPED_NAMESPACES
            yield from _walk_patterns(entry.url_patterns, spaces, inner, skipped)
        else:
            name = ":".join((*namespaces, entry.name)) if entry.name else None
            yield Entry(name, _route(inner), entry, hidden)


def _route(regexes: tuple[str, ...]) -> Route:
    """The path of a URL pattern nested under ``regexes`` (the root resolver's ``^/``
    first), from its joined regex as Django reverses it."""
    # As Django's resolver joins them for reverse(): each inner "^" dropped.
    full = regexes[0] + "".join(regex.removeprefix("^") for regex in regexes[1:])
    try:
        regex: re.Pattern[str] | None = re.compile(full)
    except re.error:  # a global flag in the middle, once joined
        regex = None
    template, params = normalize(full)[0]
    if not template.startswith("/"):  # normalize() gives up on a disjunction
        return Route("", "", regex, ())
    shown = template % {param: f"<{param}>" for param in params}
    glob = template % {param: "*" for param in params}
    if len(params) > 2:
        values = [dict.fromkeys(params, sample) for sample in PARAMETER_SAMPLES]
    else:
        values = [
            dict(zip(params, chosen, strict=True))
            for chosen in itertools.product(PARAMETER_SAMPLES, repeat=len(params))
        ]
    samples = {template % value for value in values}
    if regex is not None:
        samples = {sample for sample in samples if regex.match(sample)}
    return Route(shown, glob, regex, tuple(sorted(samples)))


def view_class_of(callback: Any) -> Any:
    """The class behind a class-based view (DRF's ``cls``, Django's ``view_class``)."""
    return getattr(callback, "cls", None) or getattr(callback, "view_class", None)


def initkwargs(callback: Any) -> dict[str, Any]:
    """What ``as_view(**initkwargs)`` gave a view: a DRF router's ``@action(throttle_scope=
    ...)``, or ``SomeView.as_view(throttle_scope=...)``."""
    for attribute in ("initkwargs", "view_initkwargs"):
        found = getattr(callback, attribute, None)
        if isinstance(found, dict):
            return found
    return {}


def is_name(value: object) -> bool:
    """True for a scope worth naming: a non-empty string."""
    return isinstance(value, str) and bool(value)


def ninja_operations(callback: Any) -> list[Any]:
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


def methods(operations: Iterable[Any]) -> str:
    """``GET, POST``: the HTTP methods of django-ninja ``operations``."""
    return ", ".join(method for operation in operations for method in operation.methods)
