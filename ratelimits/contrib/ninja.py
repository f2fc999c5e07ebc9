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
    from ninja.operation import AsyncOperation, PathView
    from ninja.throttling import BaseThrottle
except ImportError as missing:
    raise MissingExtra("ratelimits.contrib.ninja", "django-ninja", "ninja") from missing

from ratelimits.engine.decision import Verdict
from ratelimits.http import pipeline, view_asks

__all__ = ["PolicyThrottle"]

T = TypeVar("T")

#: The verdict of the request being checked, for :meth:`PolicyThrottle.wait`. One throttle
#: instance serves every request at once, so the verdict lives in the request's context,
#: not on the instance. django-ninja calls ``wait()`` right after the ``allow_request()``
#: that returned False, in the same context.
_verdict: contextvars.ContextVar[Verdict | None] = contextvars.ContextVar(
    "ratelimits_ninja_verdict", default=None
)

#: Where the check of an operation django-ninja runs on a loop, not as an async operation,
#: runs; its threads start on first use.
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
    the event loop. For such an operation the policies are decided just before, once
    django-ninja has authenticated the request, on the loop with no thread in between
    (:func:`_decide_async_operations_on_the_loop`): :meth:`allow_request` then reads that verdict.
    """

    def __init__(
        self, scope: str | None = None, cost: int | Callable[[HttpRequest], int] | None = None
    ) -> None:
        view_asks.check_face_options("PolicyThrottle", scope, cost, scope_required=False)
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
        decided = getattr(request, _DECIDED, {})
        if self in decided:  # an async operation's, decided on the loop
            verdict = decided.pop(self)
        elif _loop_running():  # an operation django-ninja ran some other way
            verdict = _run_off_loop(pipeline.run, request, self.asked()).verdict
        else:
            verdict = pipeline.run(request, self.asked()).verdict
        _verdict.set(verdict)
        return verdict is None or verdict.allowed

    def asked(self) -> pipeline.Ask:
        """What this throttle asks of the face pipeline."""
        return pipeline.Ask(PolicyThrottle, self.scope, self.ratelimit_cost)

    def wait(self) -> float | None:
        """Seconds until a slot frees, for the denied request (django-ninja rounds it up
        for ``Retry-After``)."""
        verdict = _verdict.get()
        return verdict.retry_after if verdict is not None else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(scope={self.scope!r})"


@view_asks.decided_after_authentication
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


#: Where an async operation's verdicts wait for its throttles: ``{throttle: verdict}``.
_DECIDED = "_ratelimits_ninja_verdicts"


async def _decide_on_the_loop(operation: Any, request: HttpRequest) -> None:
    """Decide ``operation``'s :class:`PolicyThrottle` s for ``request`` on the running loop
    (the table, the user and the call awaited), for their ``allow_request`` to read."""
    decided = {}
    for throttle in getattr(operation, "throttle_objects", ()):
        if isinstance(throttle, PolicyThrottle):
            decided[throttle] = (await pipeline.arun(request, throttle.asked())).verdict
    if decided:
        setattr(request, _DECIDED, decided)


def _decide_async_operations_on_the_loop(operation_class: type[AsyncOperation]) -> None:
    """Make django-ninja's async operations decide their :class:`PolicyThrottle` s on the
    loop, in the place its throttles have: after its authentication (when the operation
    has any), before its throttles, which it calls without awaiting them."""
    run_checks = getattr(operation_class, "_run_checks", None)
    run_authentication = getattr(operation_class, "_run_authentication", None)
    if run_checks is None or run_authentication is None:
        return  # a django-ninja of another shape: allow_request decides off the loop
    if getattr(run_checks, "ratelimits", False):
        return

    @functools.wraps(run_checks)
    async def _run_checks(self: AsyncOperation, request: HttpRequest) -> Any:
        if not getattr(self, "auth_callbacks", None):
            await _decide_on_the_loop(self, request)
        return await run_checks(self, request)

    @functools.wraps(run_authentication)
    async def _run_authentication(self: AsyncOperation, request: HttpRequest) -> Any:
        refused = await run_authentication(self, request)
        if refused is None:
            await _decide_on_the_loop(self, request)
        return refused

    _run_checks.ratelimits = True  # type: ignore[attr-defined]
    operation_class._run_checks = _run_checks  # type: ignore[method-assign]
    operation_class._run_authentication = _run_authentication  # type: ignore[method-assign]


_decide_async_operations_on_the_loop(AsyncOperation)


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
