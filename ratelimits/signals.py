"""The app's signals, and how the faces send them about a request.

:data:`policy_changed` is sent by the announcement of a committed policy change
(:mod:`ratelimits.database.announcements`); :data:`request_throttled`,
:data:`request_near_limit` and :data:`lockout_started` by the faces, through :func:`send`
and :func:`asend`; :data:`lockout_lifted` by the operator's reset
(:mod:`ratelimits.tools.lifting`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.dispatch import Signal

from ratelimits.engine.decision import Decision, Verdict
from ratelimits.engine.keys.kinds import Facts
from ratelimits.engine.reporting import sign_in_log

__all__ = [
    "lockout_lifted",
    "lockout_started",
    "policy_changed",
    "request_near_limit",
    "request_throttled",
]

logger = logging.getLogger("ratelimits")

#: Sent after a committed change to the policy table (no arguments besides ``sender``).
policy_changed = Signal()

#: Sent once for every request a face denies (a 429; a shadow policy never denies), by
#: ``sender`` the face: ``PolicyThrottle`` (DRF's or django-ninja's), ``RateLimitMiddleware``
#: or ``ratelimits.decorators.ratelimit``. Keyword arguments: ``request`` (the request the
#: face saw), ``decisions`` (the denying :class:`~ratelimits.engine.decision.Decision`
#: objects), ``policy`` and ``identity`` (the first denying decision's). Receivers run on
#: the request path, so keep them quick; one that raises is logged and the request still
#: gets its 429. Async receivers are awaited on the async path.
request_throttled = Signal()

#: Sent once for each policy an admitted request took near its limit: its count went from
#: below ``RATELIMITS["NEAR_LIMIT"]`` (0.8) of the client's limit to at or above it with
#: this request (:mod:`ratelimits.engine.reporting.near_limit`; shadow policies too, never for a
#: denied request). ``sender`` is the face, as for :data:`request_throttled`. Keyword
#: arguments: ``request``, ``policy`` (its name), ``decision`` (the policy's
#: :class:`~ratelimits.engine.decision.Decision`: ``limit``, ``remaining``, ``enforce``...)
#: and ``identity`` (the decision's). Receivers run on the request path, once per
#: crossing; one that raises is logged and the request goes on. Async receivers are
#: awaited on the async path.
request_near_limit = Signal()

#: Sent once when a lockout starts: by the request whose denial started a policy's lockout
#: (``Policy.lockout``; a sign-in policy's, or any other's), from ``sender`` the face
#: (``RateLimitBackend`` for a sign-in). Keyword arguments: ``request``, ``policy`` (its
#: name), ``identity`` (who is locked out, as the keys name it), ``username`` (the
#: username the sign-in typed, as typed; ``None`` outside a sign-in), ``address`` (the
#: client's address behind the trusted proxies), ``until`` (an aware UTC ``datetime``:
#: when the client may try again, the lock's end) and ``decision``. The requests refused
#: during the lock send :data:`request_throttled`, never this again. Receivers run on the
#: request path (mail in a task queue, not here); one that raises is logged. Async
#: receivers are awaited on the async path.
lockout_started = Signal()

#: Sent when an operator lifts a lock (``manage.py ratelimits reset``, the admin's
#: actions), once per policy and client whose lock was removed, from ``sender`` the tool
#: (the command, or the admin). Keyword arguments: ``policy``, ``identity`` (the locked
#: key's identity, a pair's too), ``lifted`` (what the operator asked to lift, as typed:
#: ``ip:203.0.113.7``, ``username:alice``) and ``by`` (the admin's user, ``None`` from the
#: command).
lockout_lifted = Signal()


@dataclass(frozen=True, slots=True)
class Announcement:
    """One signal a face sends about a request: the signal, its name for the log, and
    its keyword arguments besides ``sender`` and ``request``."""

    signal: Signal
    name: str
    about: dict[str, Any]


def announcements(verdict: Verdict, facts: Facts | None = None) -> list[Announcement]:
    """What a face sends about ``verdict``: :data:`lockout_started` for each lockout it
    started (logged at WARNING; ``facts``: the request's, for the username and address),
    :data:`request_throttled` for a denial, else :data:`request_near_limit` for each
    policy it took near its limit (often nothing)."""
    sent = [_started(d, facts) for d in verdict.decisions if d.lockout_started]
    if not verdict.allowed:
        return [*sent, _throttled(verdict)]
    return [
        *sent,
        *(
            Announcement(request_near_limit, "request_near_limit", _near(decision))
            for decision in verdict.near_limit
        ),
    ]


def _started(decision: Decision, facts: Facts | None) -> Announcement:
    username = None if facts is None else facts.username
    address = "" if facts is None else facts.address
    until = datetime.now(UTC) + timedelta(seconds=decision.retry_after)
    sign_in_log.lockout(decision.policy, decision.identity, username, address, until)
    about = {
        "policy": decision.policy,
        "identity": decision.identity,
        "username": username,
        "address": address,
        "until": until,
        "decision": decision,
    }
    return Announcement(lockout_started, "lockout_started", about)


def send(sender: object, request: Any, sent: list[Announcement]) -> None:
    """Send each of ``sent`` from ``sender``. A receiver's exception is logged, not
    raised: the request goes on (or is still a 429)."""
    for announcement in sent:
        results = announcement.signal.send_robust(sender, request=request, **announcement.about)
        _log_failures(results, announcement.name)


async def asend(sender: object, request: Any, sent: list[Announcement]) -> None:
    """:func:`send` from a coroutine: async receivers are awaited, sync ones run in a
    thread, as Django's ``Signal.asend_robust`` does."""
    for announcement in sent:
        signal = announcement.signal
        results = await signal.asend_robust(sender, request=request, **announcement.about)
        _log_failures(results, announcement.name)


def _throttled(verdict: Verdict) -> Announcement:
    return Announcement(request_throttled, "request_throttled", _about(verdict))


def _near(decision: Decision) -> dict[str, Any]:
    return {"policy": decision.policy, "decision": decision, "identity": decision.identity}


def _about(verdict: Verdict) -> dict[str, Any]:
    decisions = [decision for decision in verdict.decisions if decision.blocks]
    first = decisions[0]
    return {"decisions": decisions, "policy": first.policy, "identity": first.identity}


def _log_failures(results: list[tuple[Any, Any]], name: str) -> None:
    for receiver, result in results:
        if isinstance(result, Exception):
            logger.error(
                "ratelimits: %s receiver %r failed: %r",
                name,
                receiver,
                result,
                exc_info=result,
            )
