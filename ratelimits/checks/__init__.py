"""Internal, not part of the public API (see docs/api.md).

Django system checks for a misconfigured ratelimits (``manage.py check``).

One module per concern: :mod:`~ratelimits.checks.settings` (the ``RATELIMITS`` setting),
:mod:`~ratelimits.checks.addresses` (trusted proxies),
:mod:`~ratelimits.checks.django_ratelimit` (django-ratelimit's settings),
:mod:`~ratelimits.checks.installation` (the cache, the Lua code, the faces),
:mod:`~ratelimits.checks.policies` (database checks of the policies and sign-in protection),
:mod:`~ratelimits.checks.sign_in_audit` (the sign-in audit trail's switch) and
:mod:`~ratelimits.checks.server` (deploy checks that talk to Redis). Importing this package
registers them all.
"""

from ratelimits.checks import (
    addresses,
    django_ratelimit,
    installation,
    policies,
    server,
    settings,
    sign_in_audit,
)
from ratelimits.checks.installation import check_cache
from ratelimits.checks.names import (
    DJANGO_REDIS_BACKEND,
    LIMITER_MIDDLEWARE_PATH,
    MIDDLEWARE_PATH,
    SIGN_IN_BACKEND_PATH,
    THROTTLE_PATH,
)

__all__ = [
    "DJANGO_REDIS_BACKEND",
    "LIMITER_MIDDLEWARE_PATH",
    "MIDDLEWARE_PATH",
    "SIGN_IN_BACKEND_PATH",
    "THROTTLE_PATH",
    "addresses",
    "check_cache",
    "django_ratelimit",
    "installation",
    "policies",
    "server",
    "settings",
    "sign_in_audit",
]
