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
``counts = "failures"`` policy's request does (:mod:`ratelimits.http.after_response`). So
parallel guesses can never pass a limit: each spent its unit before its password was
checked.

A sign-in policy counts by the attempted username (key ``username``: case-folded and
hashed, never stored readable), by address (``ip``, or ``user_or_ip``, which is the
address of an anonymous request), by both at once (``username+ip``), by a header, or for
everyone (``global``): the key kinds of :mod:`ratelimits.engine.keys.kinds`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.utils.module_loading import import_string

from ratelimits.conf import app_settings
from ratelimits.engine.decision import Verdict
from ratelimits.engine.keys.identity import username_identity
from ratelimits.engine.keys.names import LOCK_SUFFIX
from ratelimits.engine.receipt import FAILURE_STATUS
from ratelimits.engine.store import connection
from ratelimits.engine.table.current import get_table
from ratelimits.http.pipeline import core, drivers

logger = logging.getLogger("ratelimits")

#: The key kind of a policy that counts the username alone.
USERNAME = "username"
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


def counted_username(request: Any, credentials: Mapping[str, Any]) -> str | None:
    """The username a sign-in is counted by: the account's, when
    ``RATELIMITS["SIGN_IN_ACCOUNT"]`` names a callable ``(request, credentials)`` and it
    returns one (so every name the site's lookup accepts for an account, an e-mail or a
    username, counts as that account), else the attempted username. The key kinds fold it
    (:func:`ratelimits.engine.keys.usernames.fold`). A callable that raises is logged, and
    the attempted username counts."""
    path = app_settings.SIGN_IN_ACCOUNT
    if path:
        try:
            found = _account_hook(path)(request, credentials)
        except Exception:  # a site's hook must never open the door: count as typed
            logger.exception("ratelimits: SIGN_IN_ACCOUNT %r failed", path)
            found = None
        if found:
            return str(found)
    username = attempted_username(credentials)
    return None if username is None else str(username)


@functools.cache
def _account_hook(path: str) -> Callable[[Any, Mapping[str, Any]], Any]:
    return import_string(path)  # type: ignore[no-any-return]


def lift_account(username: str) -> int:
    """Clear ``username``'s failures and lift its lockouts under every sign-in policy keyed
    by the username alone (its keys, exactly: no scan), after its password changed (see
    :func:`ratelimits.backends.password_changed`). A pair's (``username+ip``) stays: it
    holds one address, and ends with its lockout or ``ratelimits reset --identity``.
    Returns how many keys it deleted; a Redis that cannot answer is logged, never raised."""
    identity = username_identity(username)
    if identity is None:
        return 0
    keys = []
    for policy in get_table().policies:
        if policy.signs_in and policy.kind.name == USERNAME:
            key = policy.key_for(identity)
            keys += [key, f"{key.rsplit(':', 1)[0]}:{LOCK_SUFFIX}"]
    if not keys:
        return 0
    try:  # one hash tag, the identity: one slot on a cluster
        return int(connection.get_tool_client().delete(*keys))
    except connection.REDIS_ERRORS as error:
        logger.warning(
            "ratelimits: could not lift the sign-in lockouts of a changed password: %s", error
        )
        return 0


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
    ask = _ask(sender, counted_username(http, credentials), made)
    return _attempted(http, made, drivers.run(http, ask))


async def aattempt(sender: object, request: Any, credentials: Mapping[str, Any]) -> Verdict | None:
    """:func:`attempt` from a coroutine, on the running loop (``aauthenticate()``)."""
    http = _django_request(request)
    if http is None:
        return None
    made = _Attempt()
    http.__dict__[TYPED_ATTRIBUTE] = attempted_username(credentials)
    if app_settings.SIGN_IN_ACCOUNT:  # the site's lookup may query its database
        username = await sync_to_async(counted_username)(http, credentials)
    else:
        username = counted_username(http, credentials)
    ask = _ask(sender, username, made)
    return _attempted(http, made, await drivers.arun(http, ask))


def failed(request: Any) -> None:
    """Note that ``request``'s sign-in failed (Django's ``user_login_failed``): its
    attempts keep the units they spent."""
    http = _django_request(request)
    for made in getattr(http, ATTEMPTS_ATTRIBUTE, ()):
        made.failed = True


def refusal(request: Any) -> Verdict | None:
    """The verdict that refused a sign-in of ``request``, if one was refused, or that
    locks it out from now (the middleware answers either with a 429): a failed attempt
    that spent the last unit of an enforcing policy with a lockout starts that lockout
    (:func:`locking`)."""
    for made in getattr(_django_request(request), ATTEMPTS_ATTRIBUTE, ()):
        verdict = made.verdict
        if verdict is None:
            continue
        if not verdict.allowed:
            return verdict
        if made.failed:
            locked = locking(verdict)
            if locked is not None:
                return locked
    return None


def locking(verdict: Verdict) -> Verdict | None:
    """The lockout a failed attempt admitted by ``verdict`` starts, as a refusal; ``None``
    when it starts none.

    The failure that spends an enforcing policy's last unit is the last one admitted: the
    next attempt is denied, and its denial starts the policy's lockout in Redis
    (``lua/decide.lua``), so this failure is answered as locked already, as django-axes
    answers the Nth failure. Its ``Retry-After`` is the lockout, or the window's wait for a
    unit when that is longer: an attempt after it is admitted."""
    receipt = verdict.receipt
    if receipt is None:
        return None
    lockouts = {check.policy.name: check.policy.lock_seconds for check in receipt.checks}
    locked = []
    for decision in verdict.decisions:
        lockout = lockouts.get(decision.policy, 0)
        if lockout and decision.enforce and decision.allowed and decision.remaining == 0:
            wait = max(float(lockout), decision.reset)
            locked.append(
                replace(decision, allowed=False, remaining=0, retry_after=wait, reset=wait)
            )
    return Verdict(tuple(locked)) if locked else None


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


def _ask(sender: object, username: str | None, made: _Attempt) -> core.Ask:
    return core.Ask(sender, sign_in=True, username=username, outcome=made.outcome)


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
