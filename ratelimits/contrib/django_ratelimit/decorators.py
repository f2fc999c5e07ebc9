"""``@ratelimit(group=None, key=None, rate=None, method=ALL, block=True)``: django-ratelimit's
decorator, deciding each request by the view's policy (:mod:`.deciding`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import iscoroutinefunction

import ratelimits.contrib.django_ratelimit.deciding as deciding
import ratelimits.contrib.django_ratelimit.keys as keys
import ratelimits.contrib.django_ratelimit.rates as rates
from ratelimits import signals
from ratelimits.conf import app_settings
from ratelimits.contrib.django_ratelimit.counting import acounted, counted
from ratelimits.contrib.django_ratelimit.exceptions import configured_exception, exception_class
from ratelimits.contrib.django_ratelimit.spec import (
    SPEC_ATTRIBUTE,
    SPECS_ATTRIBUTE,
    Spec,
    declare,
    default_group,
)
from ratelimits.http import after_response

__all__ = ["ratelimit"]

View = TypeVar("View", bound=Callable[..., Any])

#: ``RATELIMITS["DJANGO_RATELIMIT_BLOCK"]``: a blocked request raises ``Ratelimited``.
RAISE = "raise"


def ratelimit(
    group: str | None = None,
    key: Any = None,
    rate: Any = None,
    method: Any = keys.ALL,
    block: bool = True,
) -> Callable[[View], View]:
    """django-ratelimit's ``ratelimit``, deciding by a policy (see the package's docs).

    ``key``, ``rate`` and ``method`` are read when the view is decorated (a callable rate
    or key, or its dotted path, is called per request); one django-ratelimit would not
    read raises ``ImproperlyConfigured``, and no key does when the view is called. Each
    request sets ``request.limited`` (True when over the limit, or when an earlier
    ``@ratelimit`` found it over); with ``block`` a request over the limit gets
    ratelimits' 429, or raises ``Ratelimited`` with
    ``RATELIMITS["DJANGO_RATELIMIT_BLOCK"] = "raise"`` (``RATELIMIT_EXCEPTION_CLASS``
    when set, in either mode)."""
    parsed = rates.parse_rate(rate)
    try:
        policy_key = keys.policy_key(key)
    except Exception:
        if key not in (None, ""):
            raise
        policy_key = ""  # refused when the view is called, as django-ratelimit does
    methods = keys.policy_methods(method)
    limit, window = parsed if isinstance(parsed, tuple) else (None, None)
    written = tuple(method) if isinstance(method, list) else method  # a Spec is hashable
    code_key = keys.is_code_key(key)

    def decorate(fn: View) -> View:
        name = group if group is not None else default_group(fn)
        spec = Spec(
            name, key, rate, written, bool(block), policy_key, methods, limit, window, code_key
        )
        declare(spec)
        if iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def limited_async(request: Any, *args: Any, **kwargs: Any) -> Any:
                found = await deciding.aapplied(spec, request) if spec.group else None
                if found is None:
                    request.limited = getattr(request, "limited", False)
                    return await fn(request, *args, **kwargs)
                checks = deciding.checks(found, request)
                verdict = await acounted(checks) if checks else None
                over = _over(request, found, verdict)
                if verdict is not None and (sent := deciding.announced(verdict)):
                    await signals.asend(ratelimit, request, sent)
                if over and spec.block:
                    _raise_if_asked()
                    return await deciding.arefusal(request, verdict)
                if verdict is None:
                    return await fn(request, *args, **kwargs)
                return await after_response.aserved(request, fn, *args, **kwargs)

            return _marked(limited_async, fn, spec)

        @functools.wraps(fn)
        def limited(request: Any, *args: Any, **kwargs: Any) -> Any:
            found = deciding.applied(spec, request) if spec.group else None
            if found is None:
                request.limited = getattr(request, "limited", False)
                return fn(request, *args, **kwargs)
            checks = deciding.checks(found, request)
            verdict = counted(checks) if checks else None
            over = _over(request, found, verdict)
            if verdict is not None and (sent := deciding.announced(verdict)):
                signals.send(ratelimit, request, sent)
            if over and spec.block:
                _raise_if_asked()
                return deciding.refusal(request, verdict)
            if verdict is None:
                return fn(request, *args, **kwargs)
            return after_response.served(request, fn, *args, **kwargs)

        return _marked(limited, fn, spec)

    return decorate


ratelimit.ALL = keys.ALL  # type: ignore[attr-defined]
ratelimit.UNSAFE = keys.UNSAFE  # type: ignore[attr-defined]


def _over(request: Any, found: deciding.Applied, verdict: Any) -> bool:
    over = deciding.settled(request, found, verdict)
    request.limited = over or getattr(request, "limited", False)
    return over


def _raise_if_asked() -> None:
    """Raise for a blocked request when ``DJANGO_RATELIMIT_BLOCK`` is ``"raise"`` or the
    project set ``RATELIMIT_EXCEPTION_CLASS``; return to answer ratelimits' 429."""
    chosen = configured_exception()
    if chosen is not None:
        raise chosen()
    if app_settings.DJANGO_RATELIMIT_BLOCK == RAISE:
        raise exception_class()()


def _marked(limited: Any, fn: Any, spec: Spec) -> Any:
    """``limited`` carrying ``spec`` (and the specs of the decorators under it)."""
    setattr(limited, SPEC_ATTRIBUTE, spec)
    setattr(limited, SPECS_ATTRIBUTE, (*getattr(fn, SPECS_ATTRIBUTE, ()), spec))
    return limited
