"""After the response: what an admitted request holds is given back once it is sent.

A face whose verdict carries a receipt (a concurrency slot, units of a policy that does
not count every response; see :mod:`ratelimits.engine.receipt`) calls :func:`hold`. The
give-back then runs when Django closes the response. Django's handler adds the
request's ``close()`` to every response's closers, and the server calls them after its
last byte is written: after a streaming response's last chunk, after the 500 Django
renders for a view that raised, and after a client went away mid-response. So the
give-back never delays the response the client waits for; it costs the worker one
Redis round trip after it (only for requests that hold something).

Which responses count is read from the status the faces saw: the middleware and the
decorator note it with :func:`saw`, the DRF throttle reads its view's response. Under
ASGI, a client that goes away while the view runs cancels the request before there is
a response to close: :func:`went_away` gives the slots back once the view has stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from typing import Any

from asgiref.sync import SyncToAsync

from ratelimits.engine.limiter import give_back
from ratelimits.engine.receipt import Receipt
from ratelimits.engine.reminders import Reminder

logger = logging.getLogger("ratelimits")

#: Where a request keeps what it holds, on Django's ``HttpRequest``.
PENDING_ATTRIBUTE = "_ratelimits_after_response"

#: Status of a response that never reached a face: the view raised, Django renders a 500.
SERVER_ERROR = 500


class _Pending:
    """The receipts of one request, and what is known of its response."""

    __slots__ = ("done", "receipts", "status", "status_of")

    def __init__(self) -> None:
        self.receipts: list[tuple[Receipt, Outcome | None]] = []
        self.status: int | None = None
        self.status_of: Callable[[], int] | None = None
        self.done = False

    def settle(self) -> None:
        """Give back what the response does not keep, once."""
        if self.done:
            return
        self.done = True
        status = self.status
        if status is None and self.status_of is not None:
            status = self.status_of()
        if status is None:
            _warn_unseen([receipt for receipt, outcome in self.receipts if outcome is None])
        _give_back_all(self.receipts, status)


#: What decides a receipt's give-back instead of its response's status: a sign-in's
#: outcome (:mod:`ratelimits.http.sign_in`), read as a status.
Outcome = Callable[[], int]


def hold(
    request: Any,
    receipt: Receipt,
    status_of: Callable[[], int] | None = None,
    *,
    outcome: Outcome | None = None,
) -> None:
    """Give ``receipt`` back after ``request``'s response. ``status_of`` tells that
    response's status when no middleware or decorator saw it (the DRF throttle's view);
    ``outcome``, when given, replaces the status for this receipt alone (a sign-in
    attempt's, known whatever the response)."""
    http = getattr(request, "_request", request)  # Django's request under DRF's
    pending = _pending(http)
    if pending is None:
        pending = _Pending()
        setattr(http, PENDING_ATTRIBUTE, pending)
        close = http.close

        def close_after_giving_back() -> None:
            try:
                pending.settle()
            finally:
                close()

        # An attribute of this request only: the handler adds it to the response's closers.
        http.close = close_after_giving_back
    pending.receipts.append((receipt, outcome))
    if status_of is not None:
        pending.status_of = status_of


def saw(request: Any, status: int) -> None:
    """Note the status of ``request``'s response (the outermost face to see it wins)."""
    pending = _pending(request)
    if pending is not None:
        pending.status = status


@contextlib.contextmanager
def watching(request: Any) -> Iterator[None]:
    """Around a view a face admitted: one that raises counts as the 500 Django renders
    for it; one cancelled under ASGI (the client went away) gives back at once."""
    try:
        yield
    except asyncio.CancelledError:
        went_away(request)
        raise
    except Exception:
        saw(request, SERVER_ERROR)
        raise


def served(request: Any, view: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The response of ``view`` to ``request``, which a face admitted: watched
    (:func:`watching`) and its status noted (:func:`saw`)."""
    with watching(request):
        response = view(request, *args, **kwargs)
    saw(request, getattr(response, "status_code", SERVER_ERROR))
    return response


async def aserved(request: Any, view: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """:func:`served` for a coroutine view."""
    with watching(request):
        response = await view(request, *args, **kwargs)
    saw(request, getattr(response, "status_code", SERVER_ERROR))
    return response


def went_away(request: Any) -> None:
    """The client left before a response (ASGI cancelled the request): give the slots
    back without waiting; units of counting policies stay spent.

    Cancelling stops an async view, but a sync view keeps running in the thread Django
    gives the request's sync code (asgiref's executor for the request): the give-back
    is queued on that thread, so it runs once the view has finished, not before.
    """
    pending = _pending(request)
    if pending is None or pending.done:
        return
    pending.done = True
    executor = _request_thread()
    if executor is not None:
        try:
            executor.submit(_give_back_all, pending.receipts, None)
            return
        except RuntimeError:  # shut down already: nothing of the request runs there
            pass
    asyncio.get_running_loop().run_in_executor(None, _give_back_all, pending.receipts, None)


def _request_thread() -> Executor | None:
    """The executor of this request's sync code under Django's ASGI handler (one thread
    per request, as asgiref's ``ThreadSensitiveContext`` keeps it), if there is one."""
    context = SyncToAsync.thread_sensitive_context.get(None)
    if context is None:
        return None
    return SyncToAsync.context_to_thread_executor.get(context)


def _pending(request: Any) -> _Pending | None:
    return getattr(request, "_request", request).__dict__.get(PENDING_ATTRIBUTE)  # type: ignore[no-any-return]


def _give_back_all(receipts: list[tuple[Receipt, Outcome | None]], status: int | None) -> None:
    for receipt, outcome in receipts:
        give_back(receipt, status if outcome is None else outcome())


#: Policies warned about (again each minute, per name).
_unseen = Reminder()


def _warn_unseen(receipts: list[Receipt]) -> None:
    names = {
        check.policy.name
        for receipt in receipts
        for check in receipt.checks
        if check.policy.counts != "all"
    }
    due = sorted(name for name in names if _unseen.due(name))
    if due:
        logger.warning(
            "ratelimits: no face saw the status of a response under %s, so its units stay "
            "spent: add ratelimits.middleware.RateLimitMiddleware to MIDDLEWARE (a "
            "django-ninja operation's status is seen only there). Repeated every minute "
            "while it lasts.",
            ", ".join(due),
        )
