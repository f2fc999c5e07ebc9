"""The pipeline's two drivers: :func:`run` does each step of :func:`~.core.plan` with
the sync client, :func:`arun` on the running event loop, with no thread in between.
The steps are the only code that differs between them."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

from django.utils.functional import LazyObject, empty

import ratelimits.http.pipeline.core as core
from ratelimits import signals
from ratelimits.engine.limiter import adecide, decide
from ratelimits.engine.table.current import aget_table, get_table
from ratelimits.http import responses

T = TypeVar("T")


def run(request: Any, ask: core.Ask) -> core.Passage:
    """The pipeline for ``request``, from sync code."""
    return drive(core.plan(request, ask), request)


async def arun(request: Any, ask: core.Ask) -> core.Passage:
    """The pipeline for ``request``, from a coroutine: the table, the user, the decide
    call, async signal receivers and a coroutine ``THROTTLED_VIEW`` are awaited."""
    return await adrive(core.plan(request, ask), request)


def drive(steps: Generator[core.Step, Any, T], request: Any) -> T:
    r"""Do each of ``steps`` (:class:`~.core.Step`\s) for ``request`` with the sync
    client; what they return."""
    given = None
    while True:
        try:
            step = steps.send(given)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        given = _do(step, request)


async def adrive(steps: Generator[core.Step, Any, T], request: Any) -> T:
    """:func:`drive` on the running event loop, with no thread in between."""
    given = None
    while True:
        try:
            step = steps.send(given)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        given = await _ado(step, request)


def _do(step: core.Step, request: Any) -> Any:
    match step:
        case core.TABLE:
            return get_table()
        case core.Decide(checks):
            return decide(checks)
        case core.Announce(sender, sent):
            return signals.send(sender, request, sent)
        case core.Refuse(verdict):
            return responses.throttled(request, verdict)
    return None  # core.USER: sync code reads a lazy user where it is


async def _ado(step: core.Step, request: Any) -> Any:
    match step:
        case core.TABLE:
            return await aget_table()
        case core.Decide(checks):
            return await adecide(checks)
        case core.Announce(sender, sent):
            return await signals.asend(sender, request, sent)
        case core.Refuse(verdict):
            return await responses.athrottled(request, verdict)
    return await _load_user(request)  # core.USER


async def _load_user(request: Any) -> None:
    """Load ``request.user`` without a thread: a lazy user is replaced by the one
    ``request.auser()`` loads (the same user the lazy object would give)."""
    user = request.__dict__.get("user")
    auser = getattr(request, "auser", None)
    if isinstance(user, LazyObject) and user._wrapped is empty and auser is not None:
        request.user = await auser()
