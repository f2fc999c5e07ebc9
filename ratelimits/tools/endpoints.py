"""What a policy's ``endpoint`` can name in this project: URL names (plain Django views,
DRF routers' routes and django-ninja operations alike), scopes (DRF's ``throttle_scope``,
the ``ratelimit(scope=...)`` decorator's, django-ninja's ``PolicyThrottle(scope=...)``)
and URL paths.

Used by the admin to suggest values (:func:`suggestions`), and by the admin and the
``ratelimits policies`` command to tell a policy that matches none of them
(:class:`EndpointIndex`): a typo that limits nothing. django-ninja is never imported here:
its operations are looked for only when the URLconf loaded it.
"""

from __future__ import annotations

import difflib
import fnmatch
import itertools
import re
import string
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver
from django.utils.regex_helper import normalize

from ratelimits.http.gate import scope_of

#: URL namespaces that are never rate-limited API endpoints (``ratelimits``: the metrics
#: view, a plain Django view that ``PolicyThrottle`` never sees). Not suggested; a policy
#: naming one of their URLs still matches it.
SKIPPED_NAMESPACES = frozenset({"admin", "ratelimits"})

#: What the admin and the command say of a policy whose endpoint matches nothing.
UNMATCHED = "matches no URL name, scope or path"


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
    for entry in _walk(get_resolver(urlconf)):
        if entry.hidden:
            continue
        callback = entry.pattern.callback
        where = entry.route.path or "a regex route"
        operations = _ninja_operations(callback)
        if entry.name:
            if operations:
                names.setdefault(entry.name, f"django-ninja {_methods(operations)} {where}")
            else:
                names.setdefault(entry.name, f"URL name of {where}")
        view_class = _view_class(callback)
        scope = getattr(view_class, "throttle_scope", None)
        if _is_name(scope):
            scopes.setdefault(scope, f"throttle_scope of {view_class.__name__}")
        scope = _initkwargs(callback).get("throttle_scope")
        if _is_name(scope):
            scopes.setdefault(scope, f"throttle_scope of {where}")
        scope = scope_of(callback)  # the decorator's, on a view or its dispatch()
        if _is_name(scope):
            view_name = getattr(view_class or callback, "__name__", where)
            scopes.setdefault(scope, f"ratelimit(scope=...) on {view_name}")
        for operation in operations:
            for throttle in getattr(operation, "throttle_objects", None) or ():
                scope = getattr(throttle, "ratelimit_scope", None)
                if _is_name(scope):
                    on = f"{_methods([operation])} {where}"
                    scopes.setdefault(scope, f"{type(throttle).__name__}(scope=...) on {on}")
    found = [Suggestion(value, label) for value, label in sorted(names.items())]
    found += [Suggestion(value, label) for value, label in sorted(scopes.items())]
    return found


class EndpointIndex:
    """The URL names, scopes and URL paths of one URLconf, read once, to tell the endpoints
    that match none of them (:meth:`matches`) and the nearest one that does
    (:meth:`nearest`). Build one per page or command run, and ask it for every policy.

    A name endpoint matches a URL name or a scope, as the policy table compares them. A
    path glob (an endpoint starting with ``/`` or ``*``, as
    :attr:`~ratelimits.engine.policy.CompiledPolicy.is_path_pattern` tells) matches when
    some path reaches both: one of the URLconf's paths with sample values in its
    parameters (:data:`PARAMETER_SAMPLES`) that the glob matches, or the glob with its
    wildcards filled in (:data:`STAR_FILLINGS`) that a URL pattern's regex matches. Either
    is a real path, so a glob said to match does; a glob whose only paths are far from
    every sample and filling would be said to match nothing (a warning, never a refusal).
    Every namespace counts, the admin's too: a policy may limit the admin's login page.

    A scope that a view sets only at run time is not seen: such a policy reads as matching
    nothing here, and still works.
    """

    def __init__(self, urlconf: str | None = None) -> None:
        names: set[str] = set()
        scopes: set[str] = set()
        routes: list[_Route] = []
        for entry in _walk(get_resolver(urlconf)):
            callback = entry.pattern.callback
            if entry.name:
                names.add(entry.name)
            routes.append(entry.route)
            found = [
                getattr(_view_class(callback), "throttle_scope", None),
                _initkwargs(callback).get("throttle_scope"),
                scope_of(callback),
            ]
            for operation in _ninja_operations(callback):
                for throttle in getattr(operation, "throttle_objects", None) or ():
                    found.append(getattr(throttle, "ratelimit_scope", None))
            scopes.update(scope for scope in found if _is_name(scope))
        self.names = frozenset(names)
        self.scopes = frozenset(scopes)
        self.routes = tuple(routes)
        self._matched: dict[str, bool] = {}
        self._candidates: list[str] | None = None

    def matches(self, endpoint: str) -> bool:
        """True when ``endpoint`` names a URL name or a scope, or is a path glob that a
        path of the URLconf matches."""
        found = self._matched.get(endpoint)
        if found is None:
            if endpoint.startswith(("/", "*")):
                found = self._reaches(endpoint)
            else:
                found = endpoint in self.names or endpoint in self.scopes
            self._matched[endpoint] = found
        return found

    def nearest(self, endpoint: str) -> str | None:
        """The URL name, scope or path (as a glob: ``*`` for a parameter) closest to
        ``endpoint`` in spelling, when one is close enough: ``odrers`` -> ``orders``,
        ``api/orders/`` -> ``/api/orders/``."""
        if self._candidates is None:
            paths = {route.glob for route in self.routes if route.glob}
            self._candidates = [*sorted(self.names | self.scopes), *sorted(paths)]
        found = difflib.get_close_matches(endpoint, self._candidates, n=1)
        return found[0] if found and found[0] != endpoint else None

    def problem(self, endpoint: str) -> str | None:
        """``None`` when ``endpoint`` matches; else what is wrong, with the nearest match
        when there is one: ``matches no URL name, scope or path (nearest: orders)``."""
        if self.matches(endpoint):
            return None
        nearest = self.nearest(endpoint)
        return UNMATCHED + (f" (nearest: {nearest})" if nearest else "")

    def _reaches(self, glob: str) -> bool:
        if any(
            fnmatch.fnmatchcase(sample, glob) for route in self.routes for sample in route.samples
        ):
            return True
        regexes = [route.regex for route in self.routes if route.regex is not None]
        return any(regex.match(path) for path in _fillings(glob) for regex in regexes)


# -- the URLconf, walked ----------------------------------------------------------------


#: Values tried in a URL's parameters: a number, a word, a format suffix (DRF's, with and
#: without its dot), a UUID. A path made with them counts only when the URL's regex
#: matches it.
PARAMETER_SAMPLES = ("1", "a", "json", ".json", "00000000-0000-0000-0000-000000000000")
#: Texts tried in a glob's ``*`` (all of its stars at once).
STAR_FILLINGS = ("", "1", "a", "/", "1/", "a/")


@dataclass(frozen=True, slots=True)
class _Route:
    """One URL pattern's full path: as a person reads it (``/api/items/<pk>/``) and as a
    glob (``/api/items/*/``), empty when Django cannot read its regex (one with ``|``);
    its full regex (``None`` when the joined regexes do not compile); and paths it serves,
    with sample values in its parameters."""

    path: str
    glob: str
    regex: re.Pattern[str] | None
    samples: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str | None
    route: _Route
    pattern: URLPattern
    #: Under a namespace that is not suggested (:data:`SKIPPED_NAMESPACES`).
    hidden: bool


def _walk(resolver: URLResolver) -> Iterable[_Entry]:
    yield from _walk_patterns(resolver.url_patterns, (), (resolver.pattern.regex.pattern,), False)


def _walk_patterns(
    patterns: Iterable[URLPattern | URLResolver],
    namespaces: tuple[str, ...],
    regexes: tuple[str, ...],
    hidden: bool,
) -> Iterable[_Entry]:
    for entry in patterns:
        inner = (*regexes, entry.pattern.regex.pattern)
        if isinstance(entry, URLResolver):
            spaces = (*namespaces, entry.namespace) if entry.namespace else namespaces
            skipped = hidden or entry.namespace in SKIPPED_NAMESPACES
            yield from _walk_patterns(entry.url_patterns, spaces, inner, skipped)
        else:
            name = ":".join((*namespaces, entry.name)) if entry.name else None
            yield _Entry(name, _route(inner), entry, hidden)


def _route(regexes: tuple[str, ...]) -> _Route:
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
        return _Route("", "", regex, ())
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
    return _Route(shown, glob, regex, tuple(sorted(samples)))


def _view_class(callback: Any) -> Any:
    return getattr(callback, "cls", None) or getattr(callback, "view_class", None)


def _initkwargs(callback: Any) -> dict[str, Any]:
    """What ``as_view(**initkwargs)`` gave a view: a DRF router's ``@action(throttle_scope=
    ...)``, or ``SomeView.as_view(throttle_scope=...)``."""
    for attribute in ("initkwargs", "view_initkwargs"):
        found = getattr(callback, attribute, None)
        if isinstance(found, dict):
            return found
    return {}


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


#: A glob's wildcards among its literal characters (no endpoint holds a NUL).
_STAR = "\0*"
_ANY = "\0?"


def _fillings(glob: str) -> list[str]:
    """Paths that ``glob`` matches: its ``*`` filled with each of :data:`STAR_FILLINGS`, its
    ``?`` with ``1`` or ``a`` and a ``[...]`` class with its first printable member."""
    parts: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        char = glob[i]
        i += 1
        if char == "*":
            parts.append(_STAR)
        elif char == "?":
            parts.append(_ANY)
        elif char == "[":
            j = i
            if j < n and glob[j] == "!":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            j = glob.find("]", j)
            if j == -1:
                parts.append("[")  # fnmatch reads a "[" without its "]" as itself
                continue
            members = [c for c in string.printable if fnmatch.fnmatchcase(c, glob[i - 1 : j + 1])]
            if not members:
                return []  # a class nothing matches: the glob matches no path
            parts.append(members[0])
            i = j + 1
        else:
            parts.append(char)
    found = []
    for star in STAR_FILLINGS:
        any_char = "a" if star[:1].isalpha() else "1"
        found.append(
            "".join(star if part == _STAR else any_char if part == _ANY else part for part in parts)
        )
    return found
