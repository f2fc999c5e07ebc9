"""The sign-in audit trail and log lines, from Django's own sign-in signals.

``user_login_failed`` (every ``authenticate()`` that found no user, including the one
:class:`~ratelimits.backends.RateLimitBackend` refused) is a failed attempt, or a refused
one when a sign-in policy refused it before any password was checked; ``user_logged_in``
(``login()``) is a successful one. An API request that authenticates by its credentials
on every call (DRF's Basic authentication) is no sign-in: its failures are recorded, its
successes are not.

Each failure and refusal is logged at INFO on the ``ratelimits`` logger
(:mod:`ratelimits.engine.reporting.sign_in_log`); with ``RATELIMITS["SIGN_IN_AUDIT"]`` on,
each attempt is kept for the database (:mod:`ratelimits.database.sign_in_records`), which
a thread of the process writes: the request makes no query for it.
:func:`connect` is called by ``AppConfig.ready()``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.utils import timezone

from ratelimits.conf import app_settings
from ratelimits.database import sign_in_records
from ratelimits.engine.reporting import sign_in_log
from ratelimits.http import sign_in
from ratelimits.http.proxies import client_ip
from ratelimits.models import SignInAttempt

Result = SignInAttempt.Result


def connect() -> None:
    """Connect the receivers (idempotent: each has a ``dispatch_uid``)."""
    user_login_failed.connect(on_sign_in_failed, dispatch_uid="ratelimits.audit.failed")
    user_logged_in.connect(on_signed_in, dispatch_uid="ratelimits.audit.succeeded")


def on_sign_in_failed(
    sender: Any, credentials: dict[str, Any] | None = None, request: Any = None, **kwargs: Any
) -> None:
    """A failed or refused attempt: logged, and recorded when the audit is on."""
    http = getattr(request, "_request", request)
    if http is None or not hasattr(http, "META"):
        return  # authenticate() without a request: no address, no path to record
    username = sign_in.attempted_username(credentials or {})
    refused = sign_in.refused_by(http)
    policy = ""
    if refused is not None:
        policy = next(d.policy for d in refused.decisions if d.blocks)
    address = client_ip(http.META)
    sign_in_log.failed(username, address, http.path, policy or None)
    if app_settings.SIGN_IN_AUDIT:
        result = Result.REFUSED if refused is not None else Result.FAILED
        sign_in_records.record(_entry(http, username, address, result, policy))


def on_signed_in(sender: Any, request: Any = None, user: Any = None, **kwargs: Any) -> None:
    """A successful sign-in (``login()``): recorded when the audit is on."""
    http = getattr(request, "_request", request)
    if not app_settings.SIGN_IN_AUDIT or http is None or not hasattr(http, "META"):
        return
    username = sign_in.typed_username(http)
    if username is None and user is not None:
        username = user.get_username()
    entry = _entry(http, username, client_ip(http.META), Result.SUCCEEDED, "")
    sign_in_records.record(entry)


def _entry(http: Any, username: Any, address: str, result: str, policy: str) -> Any:
    return sign_in_records.Entry(
        when=timezone.now(),
        username="" if username is None else str(username),
        address=address,
        user_agent=str(http.META.get("HTTP_USER_AGENT") or ""),
        path=str(getattr(http, "path", "") or ""),
        result=str(result),
        policy=policy,
    )
