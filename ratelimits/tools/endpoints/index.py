"""The endpoints that match nothing in the URLconf, and the nearest ones that do."""

from __future__ import annotations

import difflib
import fnmatch

from django.urls import get_resolver

from ratelimits.http.view_asks import scope_of
from ratelimits.tools.endpoints.globs import path_fillings
from ratelimits.tools.endpoints.urlconf import (
    Route,
    initkwargs,
    is_name,
    ninja_operations,
    view_class_of,
    walk,
)
from ratelimits.validators import endpoint_names

#: What the admin and the command say of a policy whose endpoint matches nothing.
UNMATCHED = "matches no URL name, scope or path"


class EndpointIndex:
    """The URL names, scopes and URL paths of one URLconf, read once, to tell the endpoints
    that match none of them (:meth:`matches`) and the nearest one that does
    (:meth:`nearest`). Build one per page or command run, and ask it for every policy.

    A name endpoint matches a URL name or a scope, as the policy table compares them. A
    path glob (an endpoint starting with ``/`` or ``*``, as
    :attr:`~ratelimits.engine.policy.compiled.CompiledPolicy.is_path_pattern` tells) matches when
    some path reaches both: one of the URLconf's paths with sample values in its
    parameters (:data:`~.urlconf.PARAMETER_SAMPLES`) that the glob matches, or the glob with its
    wildcards filled in (:data:`~.globs.STAR_FILLINGS`) that a URL pattern's regex matches. Either
    is a real path, so a glob said to match does; a glob whose only paths are far from
    every sample and filling would be said to match nothing (a warning, never a refusal).
    Every namespace counts, the admin's too: a policy may limit the admin's login page.

    A scope that a view sets only at run time is not seen: such a policy reads as matching
    nothing here, and still works.
    """

    def __init__(self, urlconf: str | None = None) -> None:
        names: set[str] = set()
        scopes: set[str] = set()
        routes: list[Route] = []
        for entry in walk(get_resolver(urlconf)):
            callback = entry.pattern.callback
            if entry.name:
                names.add(entry.name)
            routes.append(entry.route)
            found = [
                getattr(view_class_of(callback), "throttle_scope", None),
                initkwargs(callback).get("throttle_scope"),
                scope_of(callback),
            ]
            for operation in ninja_operations(callback):
                for throttle in getattr(operation, "throttle_objects", None) or ():
                    found.append(getattr(throttle, "ratelimit_scope", None))
            scopes.update(scope for scope in found if is_name(scope))
        self.names = frozenset(names)
        self.scopes = frozenset(scopes)
        self.routes = tuple(routes)
        self._matched: dict[str, bool] = {}
        self._candidates: list[str] | None = None

    def matches(self, endpoint: str) -> bool:
        """True when ``endpoint`` names a URL name or a scope (each one it lists), or is a
        path glob that a path of the URLconf matches."""
        found = self._matched.get(endpoint)
        if found is None:
            listed = endpoint_names(endpoint)
            if not listed:
                found = self._reaches(endpoint)
            else:
                found = all(name in self.names or name in self.scopes for name in listed)
            self._matched[endpoint] = found
        return found

    def nearest(self, endpoint: str) -> str | None:
        """The URL name, scope or path (as a glob: ``*`` for a parameter) closest to
        ``endpoint`` in spelling, when one is close enough: ``odrers`` -> ``orders``,
        ``api/orders/`` -> ``/api/orders/``."""
        listed = endpoint_names(endpoint)
        if len(listed) > 1:  # the nearest of the first name that matches nothing
            unmatched = [name for name in listed if not self.matches(name)]
            return self.nearest(unmatched[0]) if unmatched else None
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
        return any(regex.match(path) for path in path_fillings(glob) for regex in regexes)
