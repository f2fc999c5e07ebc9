"""The django-ninja face: :class:`PolicyThrottle` applies the matching policies to an
operation.

Give it to the API, a router or one operation::

    api = NinjaAPI(throttle=[PolicyThrottle()])
    router = Router(throttle=PolicyThrottle(scope="reports"))

    @api.get("/export", throttle=PolicyThrottle(scope="export"))
    def export(request): ...

The throttle runs after django-ninja's authentication, so a client counts as what it
authenticated as: its user, or the principal in ``request.auth`` (an API key object or
string, hashed). Over the limit django-ninja answers through its ``Throttled`` exception,
so the API's exception handlers and its JSON body apply, with ``Retry-After`` (from
:meth:`wait`); ``RateLimitHeadersMiddleware`` adds the RateLimit fields. With
``RateLimitMiddleware`` installed, an operation under this throttle is left to it: the
middleware decides nothing for it, and each policy counts the request once.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.db import close_old_connections
from django.http import HttpRequest

from ratelimits.exceptions import MissingExtra

try:
    from ninja.operation import PathView
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

    Under ``user`` and ``user_or_ip`` policies a client counts as its authentication:
    a user (Django's ``request.user``, or a user django-ninja's auth put in
    ``request.auth``), else the principal in ``request.auth``.

    django-ninja calls a throttle synchronously, also for an ``async def`` operation, on
    the event loop. There the check runs on a worker thread (the database and a lazy
    ``request.user`` may not be touched on the loop) and the loop waits for it: one
    thread hop per request (see docs/ninja.md for its measured cost).
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


@gate.decided_after_authentication
def _under_policy_throttle(view_func: Any, method: str) -> str | None:
    """When ``view_func`` is a django-ninja path whose operation for ``method`` has a
    :class:`PolicyThrottle` (the API's, a router's or its own), that throttle's scope
    (``""``: none); else ``None``."""
    return _throttled_operations(view_func).get(method)


@functools.lru_cache(maxsize=4096)
def _throttled_operations(view_func: Any) -> dict[str, str | None]:
    """``{method: scope of its PolicyThrottle, or None}`` for the operations behind a
    django-ninja view (``PathView.get_view()`` closes over its ``PathView``); empty for
    any other view."""
    for cell in getattr(view_func, "__closure__", None) or ():
        try:
            path_view = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(path_view, PathView):
            found: dict[str, str | None] = {}
            for operation in path_view.operations:
                throttles = [t for t in operation.throttle_objects if isinstance(t, PolicyThrottle)]
                scope = (throttles[0].scope or "") if throttles else None
                for method in operation.methods:
                    found.setdefault(method, scope)
            return found
    return {}


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
