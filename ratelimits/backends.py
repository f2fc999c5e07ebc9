"""Sign-in protection: :class:`RateLimitBackend` refuses ``authenticate()`` over a sign-in
policy's limit, and every failed sign-in counts.

List it first::

    AUTHENTICATION_BACKENDS = [
        "ratelimits.backends.RateLimitBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]

Then a policy with ``counts = "sign_in_failures"`` counts the failed sign-ins of the
requests it matches (endpoint ``*`` matches every path: the admin login, ``LoginView``,
DRF's Basic authentication and ``obtain_auth_token``, django-allauth, anything that calls
``authenticate()`` with the request), by the attempted ``username``, by address
(``ip``), or both with two policies. Once a policy denies, every sign-in it matches is
refused, the right password too, until the window frees a unit or the lockout ends;
``RateLimitMiddleware`` then answers it with a 429. See docs/sign-in.md.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_login_failed
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver

from ratelimits.engine.decision import Verdict
from ratelimits.http import sign_in

__all__ = ["RateLimitBackend"]


class RateLimitBackend:
    """An authentication backend that authenticates nobody: it spends each sign-in
    attempt against the sign-in policies matching its request, and refuses the attempt
    (``PermissionDenied``, which stops ``authenticate()``) when one denies it. The
    backends after it check the credentials.

    It has no ``get_user`` (nor permissions): a session is never tied to it, so the test
    client's ``force_login()``, which ties a session to the first backend that has one,
    picks the backend after it."""

    def authenticate(self, request: Any, **credentials: Any) -> None:
        _refuse_if_denied(sign_in.attempt(RateLimitBackend, request, credentials))

    async def aauthenticate(self, request: Any, **credentials: Any) -> None:
        """:meth:`authenticate` for ``aauthenticate()``, on the running loop."""
        _refuse_if_denied(await sign_in.aattempt(RateLimitBackend, request, credentials))


def _refuse_if_denied(verdict: Verdict | None) -> None:
    """Stop ``authenticate()`` when a sign-in policy denied the attempt (the pipeline has
    sent ``request_throttled``)."""
    if verdict is not None and not verdict.allowed:
        raise PermissionDenied("Too many failed sign-ins; try again later.")


@receiver(user_login_failed, dispatch_uid="ratelimits.backends.sign_in_failed")
def _sign_in_failed(sender: Any, request: Any = None, **kwargs: Any) -> None:
    """Every backend refused the credentials: the attempt keeps the units it spent."""
    sign_in.failed(request)
