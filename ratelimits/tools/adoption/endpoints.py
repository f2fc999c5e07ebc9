"""One policy endpoint for a set of views: a policy's counter is shared by every view it
matches, so one policy replaces a DRF counter only when its endpoint matches exactly the
views that spent that counter, among the views a policy would apply to."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from ratelimits.models import Policy
from ratelimits.tools.adoption.views import View
from ratelimits.tools.endpoints.globs import path_fillings
from ratelimits.validators import ENDPOINT_SEPARATOR, endpoint_names

#: The longest endpoint a policy holds.
MAX_ENDPOINT: int = Policy._meta.get_field("endpoint").max_length  # type: ignore[assignment]


class NoEndpoint(Exception):
    """No endpoint matches exactly these views; the message says what else one matches."""


def choose_endpoint(views: Sequence[View], others: Sequence[View]) -> str:
    """The endpoint matching every one of ``views`` and none of ``others``: the
    ``throttle_scope`` every one of them has (whatever its name), else the URL name of a
    single view, else a path glob of their common prefix, else the list of their URL names
    (comma-separated). :class:`NoEndpoint` when none does."""
    candidates = []
    scopes = {view.scope for view in views}
    if len(scopes) == 1 and None not in scopes:
        candidates.append(next(iter(scopes)))  # type: ignore[arg-type]
    names = sorted(view.name for view in {view.name: view for view in views}.values() if view.name)
    named = len(names) == len({view.name for view in views})  # no view without a name
    if named and len(names) == 1:
        candidates.append(names[0])
    globs = [view.route.glob for view in views]
    if all(globs):
        prefix = _common_prefix([glob.split("*")[0] for glob in globs])
        candidates.append(prefix + "*")
    listed = ENDPOINT_SEPARATOR.join(names)
    listable = all(ENDPOINT_SEPARATOR not in name for name in names)
    if named and len(names) > 1 and len(listed) <= MAX_ENDPOINT and listable:
        candidates.append(listed)
    if not candidates:
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
    name (or one the endpoint lists) is the view's URL name or its scope; a glob (starting
    with ``/`` or ``*``) matches one of its paths, or the view's pattern matches one of the
    glob's paths."""
    listed = endpoint_names(endpoint)
    if listed:
        return view.name in listed or view.scope in listed
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
