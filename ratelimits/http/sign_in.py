"""Sign-in attempts under sign-in policies (``counts = "sign_in_failures"``).

Django's sign-in forms answer a wrong password with 200 and the form again, so no status
tells a failure; Django's ``user_login_failed`` signal does. Every ``authenticate()`` that
carries a request passes through :class:`~ratelimits.backends.RateLimitBackend` first,
which calls :func:`attempt`: a sign-in is one more ask through the faces' one pipeline
(:func:`ratelimits.http.pipeline.core.plan`): the sign-in policies matching the request
(by path, URL name and method, as any policy) each spend a unit for the attempt, in one
Redis call, before any password is checked, and the signals are sent as for any face
(``request_throttled``, ``request_near_limit``). Over a limit (or in a lockout) the
attempt is refused, and ``authenticate()`` fails whatever the password. Otherwise the
other backends check the credentials; :func:`failed` (on ``user_login_failed``) marks the
attempt failed, and after the response every attempt that did not fail gets its units back, as a
``counts = "failures"`` policy's request does (:mod:`ratelimits.http.afterwards`). So
parallel guesses can never pass a limit: each spent its unit before its password was
checked.

A sign-in policy counts by the attempted username (key ``username``: case-folded and
hashed, never stored readable), by address (``ip``, or ``user_or_ip``, which is the
address of an anonymous request), by both at once (``username+ip``), by a header, or for
everyone (``global``): the key kinds of :mod:`ratelimits.engine.keys.kinds`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model

from ratelimits.engine.decision import Verdict
from ratelimits.engine.receipt import FAILURE_STATUS
from ratelimits.http.pipeline import core, drivers

#: Where a request keeps its sign-in attempts, on Django's ``HttpRequest``.
ATTEMPTS_ATTRIBUTE = "_ratelimits_sign_ins"
#: Where a request keeps the username its last sign-in typed (the audit trail's).
TYPED_ATTRIBUTE = "_ratelimits_typed_username"
#: The outcome given to an attempt's receipt: a failure keeps its units, anything else
#: (read as a success) gives them back.
_FAILED, _NOT_FAILED = FAILURE_STATUS, 200


class _Attempt:
    """One ``authenticate()`` under sign-in policies: its verdict, and whether it failed."""

    __slots__ = ("failed", "verdict")

    def __init__(self) -> None:
        self.verdict: Verdict | None = None
        self.failed = False

    def outcome(self) -> int:
        return _FAILED if self.failed else _NOT_FAILED


def attempted_username(credentials: Mapping[str, Any]) -> Any:
    """The username a sign-in attempts: the user model's ``USERNAME_FIELD`` in the
    credentials, else ``username``, else ``email`` (django-allauth's); ``None`` if none."""
    for name in (get_user_model().USERNAME_FIELD, "username", "email"):
        value = credentials.get(name)
        if value:
            return value
    return None


def attempt(sender: object, request: Any, credentials: Mapping[str, Any]) -> Verdict | None:
    """Spend a unit of each sign-in policy matching ``request`` for this attempt, through
    the one pipeline (:func:`ratelimits.http.pipeline.run`; ``sender`` names the face in
    the signals it sends); the verdict (denied: refuse the sign-in), or ``None`` when no
    sign-in policy applies (or ``RATELIMITS["MODE"]`` is ``"off"``)."""
    http = _django_request(request)
    if http is None:
        return None
    made = _Attempt()
    http.__dict__[TYPED_ATTRIBUTE] = attempted_username(credentials)
    return _attempted(http, made, drivers.run(http, _ask(sender, credentials, made)))


async def aattempt(sender: object, request: Any, credentials: Mapping[str, Any]) -> Verdict | None:
    """:func:`attempt` from a coroutine, on the running loop (``aauthenticate()``)."""
    http = _django_request(request)
    if http is None:
        return None
    made = _Attempt()
    http.__dict__[TYPED_ATTRIBUTE] = attempted_username(credentials)
    return _attempted(http, made, await drivers.arun(http, _ask(sender, credentials, made)))


def failed(request: Any) -> None:
    """Note that ``request``'s sign-in failed (Django's ``user_login_failed``): its
    attempts keep the units they spent."""
    http = _django_request(request)
    for made in getattr(http, ATTEMPTS_ATTRIBUTE, ()):
        made.failed = True


def refusal(request: Any) -> Verdict | None:
    """The verdict that refused a sign-in of ``request``, if one was refused (the
    middleware answers it with a 429)."""
    for made in getattr(_django_request(request), ATTEMPTS_ATTRIBUTE, ()):
        if made.verdict is not None and not made.verdict.allowed:
            return made.verdict
    return None


def refused_by(request: Any) -> Verdict | None:
    """The verdict that refused a sign-in of ``request`` before its password was checked
    (over a sign-in policy's limit, or locked out), if one did."""
    for made in getattr(_django_request(request), ATTEMPTS_ATTRIBUTE, ()):
        if made.verdict is not None and not made.verdict.allowed:
            return made.verdict
    return None


def typed_username(request: Any) -> Any:
    """The username the last sign-in of ``request`` typed (``None``: none seen)."""
    return getattr(_django_request(request), TYPED_ATTRIBUTE, None)


def _ask(sender: object, credentials: Mapping[str, Any], made: _Attempt) -> core.Ask:
    username = attempted_username(credentials)
    return core.Ask(
        sender,
        sign_in=True,
        username=None if username is None else str(username),
        outcome=made.outcome,
    )


def _attempted(http: Any, made: _Attempt, passage: core.Passage) -> Verdict | None:
    """Keep the attempt on the request (for :func:`failed` and :func:`refusal`)."""
    if passage.verdict is None:
        return None
    made.verdict = passage.verdict
    http.__dict__.setdefault(ATTEMPTS_ATTRIBUTE, []).append(made)
    return passage.verdict


def _django_request(request: Any) -> Any:
    """Django's ``HttpRequest`` behind ``request`` (DRF's wraps one); ``None`` when
    ``authenticate()`` was called without a request."""
    if request is None:
        return None
    http = getattr(request, "_request", request)
    return http if hasattr(http, "META") and hasattr(http, "path") else None
