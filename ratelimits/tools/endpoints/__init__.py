"""What a policy's ``endpoint`` can name in this project: URL names (plain Django views,
DRF routers' routes and django-ninja operations alike), scopes (DRF's ``throttle_scope``,
the ``ratelimit(scope=...)`` decorator's, django-ninja's ``PolicyThrottle(scope=...)``)
and URL paths.

Used by the admin to suggest values (:func:`suggestions`), and by the admin and the
``ratelimits policies`` command to tell a policy that matches none of them
(:class:`EndpointIndex`): a typo that limits nothing. django-ninja is never imported here:
its operations are looked for only when the URLconf loaded it.

One module per job: :mod:`~.urlconf` (the URLconf, walked), :mod:`~.suggestions`,
:mod:`~.index` (the endpoints that match nothing) and :mod:`~.globs` (paths a glob matches).
"""

from ratelimits.tools.endpoints.globs import STAR_FILLINGS
from ratelimits.tools.endpoints.index import UNMATCHED, EndpointIndex
from ratelimits.tools.endpoints.suggestions import Suggestion, suggestions
from ratelimits.tools.endpoints.urlconf import PARAMETER_SAMPLES, SKIPPED_NAMESPACES

__all__ = [
    "PARAMETER_SAMPLES",
    "SKIPPED_NAMESPACES",
    "STAR_FILLINGS",
    "UNMATCHED",
    "EndpointIndex",
    "Suggestion",
    "suggestions",
]
