"""One policy endpoint for a set of views: a policy's counter is shared by every view it
matches, so one policy replaces a DRF counter only when its endpoint matches exactly the
views that spent that counter, among the views a policy would apply to."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from ratelimits.tools.adoption.views import View
from ratelimits.tools.endpoints.globs import path_fillings


class NoEndpoint(Exception):
    """No endpoint matches exactly these views; the message says what else one matches."""


def choose_endpoint(views: Sequence[View], others: Sequence[View], scope: str | None = None) -> str:
    """The endpoint matching every one of ``views`` and none of ``others``: ``scope`` (a
    ``throttle_scope`` the views share), else the URL name of a single view, else a path
    glob of their common prefix. :class:`NoEndpoint` when none does."""
    candidates = []
    if scope:
        candidates.append(scope)
    names = {view.name for view in views}
    if len(names) == 1 and None not in names:
        candidates.append(next(iter(names)))
    globs = [view.route.glob for view in views]
    if all(globs):
        prefix = _common_prefix([glob.split("*")[0] for glob in globs])
        candidates.append(prefix + "*")
    else:
        unread = next(view for view in views if not view.route.glob)
        raise NoEndpoint(f"Django cannot spell the path of {unread.label}")
    problem = ""
    for endpoint in candidates:
        missed = [view for view in views if not reaches(endpoint, view)]
        also = [view for view in others if reaches(endpoint, view)]
        if not missed and not also:
            return endpoint
        if not problem:
            problem = _problem(endpoint, missed, also)
    raise NoEndpoint(problem)


def reaches(endpoint: str, view: View) -> bool:
    """Whether a policy on ``endpoint`` matches ``view``, as the policy table matches: a
    name is the view's URL name or its scope; a glob (starting with ``/`` or ``*``)
    matches one of its paths, or the view's pattern matches one of the glob's paths."""
    if not endpoint.startswith(("/", "*")):
        return endpoint in (view.name, view.scope)
    route = view.route
    if route.glob and fnmatch.fnmatchcase(route.glob, endpoint):
        return True
    if any(fnmatch.fnmatchcase(sample, endpoint) for sample in route.samples):
        return True
    return route.regex is not None and any(
        route.regex.match(path) for path in path_fillings(endpoint)
    )


def _problem(endpoint: str, missed: list[View], also: list[View]) -> str:
    if also:
        shown = ", ".join(view.label for view in also[:3])
        more = f" and {len(also) - 3} more" if len(also) > 3 else ""
        return f"the endpoint {endpoint} would also match {shown}{more}"
    shown = ", ".join(view.label for view in missed[:3])
    return f"the endpoint {endpoint} would miss {shown}"


def _common_prefix(texts: list[str]) -> str:
    """The longest text every one of ``texts`` starts with."""
    first, last = min(texts), max(texts)
    size = 0
    while size < len(first) and first[size] == last[size]:
        size += 1
    return first[:size]
