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

Listing it never makes Django's ``login(request, user)`` fail: without ``backend=`` on a
user that ``authenticate()`` did not return (a sign-up view, ``PasswordResetConfirmView``
with ``post_reset_login``), Django picks the one backend configured, and raises
``ValueError`` ("multiple authentication backends configured") when there are two. This
backend authenticates nobody, so it does not count: :func:`connect` gives the user model a
default ``backend``, the one other backend, read from ``AUTHENTICATION_BACKENDS`` when
``login()`` asks. And a password that changes (a completed reset, a change, the admin's
form, ``changepassword``: any ``set_password()`` then ``save()``) lifts that username's
lockouts (:func:`password_changed`).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_login_failed
from django.core.exceptions import PermissionDenied
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils.module_loading import import_string

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


def login_backend() -> str | None:
    """The backend Django's ``login()`` ties a session to when it is not told one: the only
    entry of ``AUTHENTICATION_BACKENDS`` that is not a :class:`RateLimitBackend`, when
    the list holds one of those and exactly one other; else ``None`` (Django's own
    choice, and its error, stand)."""
    paths = list(settings.AUTHENTICATION_BACKENDS)
    others = [path for path in paths if not _is_ours(path)]
    return others[0] if len(others) == 1 and len(paths) > 1 else None


def _is_ours(path: str) -> bool:
    try:
        backend = import_string(path)
    except ImportError:
        return False
    return isinstance(backend, type) and issubclass(backend, RateLimitBackend)


class _LoginBackend:
    """The user model's default ``backend``: :func:`login_backend`, read when asked. A
    non-data descriptor, so the ``backend`` that ``authenticate()`` sets on a user it
    returns wins; with no backend to give, the attribute is missing, as without it."""

    def __get__(self, user: Any, owner: Any = None) -> Any:
        if user is None:
            return self
        path = login_backend()
        if path is None:
            raise AttributeError("backend")
        return path


def connect() -> None:
    """Give the user model its default ``backend`` (unless it has an attribute of that
    name) and lift lockouts when a password changes (:func:`password_changed`); called
    once, from the app's ``ready()``."""
    model = get_user_model()
    if not hasattr(model, "backend"):
        model.backend = _LoginBackend()
    post_save.connect(password_changed, dispatch_uid="ratelimits.backends.password_changed")


def password_changed(sender: Any, instance: Any = None, **kwargs: Any) -> None:
    """A user saved with a new password (``set_password()`` keeps the raw password in
    ``_password`` until ``save()`` has told the validators, after this signal): lift the
    lockouts of its username, so a completed reset lets its owner back in."""
    if getattr(instance, "_password", None) is None or not hasattr(instance, "get_username"):
        return
    sign_in.lift_account(instance.get_username())
