"""The django-ninja face: :class:`PolicyThrottle` applies the matching policies to an
operation.

Give it to the API, a router or one operation::

    api = NinjaAPI(throttle=[PolicyThrottle()])
    router = Router(throttle=PolicyThrottle(scope="reports"))

    @api.get("/export", throttle=PolicyThrottle(scope="export"))
    def export(request): ...

Over the limit django-ninja answers its 429 with ``Retry-After`` (from :meth:`wait`);
``RateLimitHeadersMiddleware`` adds the RateLimit fields. Each policy counts a request
once, whichever faces it meets: with ``RateLimitMiddleware`` installed, the policies it
decided before the operation ran are not counted again here.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.db import close_old_connections
from django.http import HttpRequest

from ratelimits.exceptions import MissingExtra

try:
    from ninja.throttling import BaseThrottle
except ImportError as missing:
    raise MissingExtra("ratelimits.contrib.ninja", "django-ninja", "ninja") from missing

from ratelimits.engine.decision import Verdict
from ratelimits.http import gate

__all__ = ["PolicyThrottle"]

T = TypeVar("T")

#: The verdict of the request being checked, for :meth:`PolicyThrottle.wait`. One throttle
#: instance serves every request at once, so the verdict lives in the request's context,
#: not on the instance. django-ninja calls ``wait()`` right after the ``allow_request()``
#: that returned False, in the same context.
_verdict: contextvars.ContextVar[Verdict | None] = contextvars.ContextVar(
    "ratelimits_ninja_verdict", default=None
)

#: Where an async operation's check runs (see :class:`PolicyThrottle`); its threads start
#: on first use.
_off_loop = ThreadPoolExecutor(max_workers=4, thread_name_prefix="ratelimits-ninja")


class PolicyThrottle(BaseThrottle):
    """Rate-limits a django-ninja operation by the ``Policy`` rows that match it.

    A policy matches when its endpoint is ``scope`` (as DRF's ``throttle_scope``), the
    operation's URL name (``namespace:name``, e.g. ``ninja:items``), or a glob matching
    the path, and its methods are blank or hold the request's method. Overrides, exempt
    networks and the one Redis call per request are as for every face.

    The identity is Django's ``request.user`` (or the client address), not
    django-ninja's ``request.auth``.

    django-ninja calls a throttle synchronously, also for an ``async def`` operation, on
    the event loop. There the check runs on a worker thread (the database and a lazy
    ``request.user`` may not be touched on the loop) and the loop waits for it. For async
    operations under ASGI, ``RateLimitMiddleware`` is the native async path: it decides
    path and URL-name policies on the loop, and this throttle then counts only what is
    left (its ``scope`` policies).
    """

    def __init__(
        self, scope: str | None = None, cost: int | Callable[[HttpRequest], int] | None = None
    ) -> None:
        gate.check_face_options("PolicyThrottle", scope, cost, scope_required=False)
        #: Policies whose endpoint is this name apply too (``None``: none by scope).
        self.scope = scope
        #: What one request spends instead of each policy's own cost: an int, or a
        #: callable ``(request) -> int`` (``None``: the policies' costs).
        self.ratelimit_cost = cost

    @property
    def ratelimit_scope(self) -> str | None:
        """:attr:`scope`, under the name decorated views carry it (the admin's endpoint
        suggestions read it)."""
        return self.scope

    def allow_request(self, request: HttpRequest) -> bool:
        """Decide the policies of ``request`` no face has decided yet; False over the limit
        (``request_throttled`` is then sent, with this class as sender)."""
        if _loop_running():
            verdict = _run_off_loop(
                gate.check, request, self.scope, PolicyThrottle, self.ratelimit_cost
            )
        else:
            verdict = gate.check(request, self.scope, PolicyThrottle, self.ratelimit_cost)
        _verdict.set(verdict)
        return verdict is None or verdict.allowed

    def wait(self) -> float | None:
        """Seconds until a slot frees, for the denied request (django-ninja rounds it up
        for ``Retry-After``)."""
        verdict = _verdict.get()
        return verdict.retry_after if verdict is not None else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(scope={self.scope!r})"


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _run_off_loop(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` on a worker thread, in a copy of this context; this thread (an
    event loop's) waits for it."""
    context = contextvars.copy_context()
    return _off_loop.submit(context.run, _with_fresh_connections, function, *args).result()


def _with_fresh_connections(function: Callable[..., T], *args: Any) -> T:
    # As Django does around a request: the worker's connections follow CONN_MAX_AGE.
    close_old_connections()
    try:
        return function(*args)
    finally:
        close_old_connections()
