"""``@ratelimit(group=None, key=None, rate=None, method=ALL, block=True)``: django-ratelimit's
decorator, deciding each request by the view's policy (:mod:`.policies`) through the face
pipeline."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

import ratelimits.contrib.django_ratelimit.keys as keys
import ratelimits.contrib.django_ratelimit.policies as policies
import ratelimits.contrib.django_ratelimit.rates as rates
from ratelimits.conf import app_settings
from ratelimits.contrib.django_ratelimit.exceptions import exception_class
from ratelimits.contrib.django_ratelimit.spec import (
    SPEC_ATTRIBUTE,
    SPECS_ATTRIBUTE,
    Spec,
    declare,
    default_group,
)
from ratelimits.engine import global_mode as mode
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.http import afterwards, pipeline
from ratelimits.http.headers import decisions_of

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

    ``key``, ``rate`` and ``method`` are read when the view is decorated; one a policy
    cannot express raises ``ImproperlyConfigured``. Each request sets ``request.limited``
    (True when over the limit, or when an earlier ``@ratelimit`` found it over); with
    ``block`` a request over the limit gets ratelimits' 429, or raises ``Ratelimited``
    with ``RATELIMITS["DJANGO_RATELIMIT_BLOCK"] = "raise"``."""
    limits = rates.parse_rate(rate)
    try:
        policy_key = keys.policy_key(key)
    except ImproperlyConfigured:
        if limits is not None:
            raise
        policy_key = ""  # rate=None limits nothing, whatever the key (as django-ratelimit)
    methods = keys.policy_methods(method)
    limit, window = limits if limits is not None else (None, None)
    written = tuple(method) if isinstance(method, list) else method  # a Spec is hashable

    def decorate(fn: View) -> View:
        name = group if group is not None else default_group(fn)
        spec = Spec(name, key, rate, written, bool(block), policy_key, methods, limit, window)
        declare(spec)
        if iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def limited_async(request: Any, *args: Any, **kwargs: Any) -> Any:
                policy = await policies.apolicy_for(spec) if _applies(spec) else None
                if policy is None or not _method_matches(policy, request):
                    request.limited = getattr(request, "limited", False)
                    return await fn(request, *args, **kwargs)
                passage = await pipeline.arun(request, _ask(policy, spec))
                refusal = _settle(request, passage, policy, spec)
                if refusal is not None:
                    return refusal
                if passage.verdict is None:
                    return await fn(request, *args, **kwargs)
                return await afterwards.aserved(request, fn, *args, **kwargs)

            return _marked(limited_async, fn, spec)

        @functools.wraps(fn)
        def limited(request: Any, *args: Any, **kwargs: Any) -> Any:
            policy = policies.policy_for(spec) if _applies(spec) else None
            if policy is None or not _method_matches(policy, request):
                request.limited = getattr(request, "limited", False)
                return fn(request, *args, **kwargs)
            passage = pipeline.run(request, _ask(policy, spec))
            refusal = _settle(request, passage, policy, spec)
            if refusal is not None:
                return refusal
            if passage.verdict is None:
                return fn(request, *args, **kwargs)
            return afterwards.served(request, fn, *args, **kwargs)

        return _marked(limited, fn, spec)

    return decorate


ratelimit.ALL = keys.ALL  # type: ignore[attr-defined]
ratelimit.UNSAFE = keys.UNSAFE  # type: ignore[attr-defined]


def _applies(spec: Spec) -> bool:
    """A spec with a rate and a group, while django-ratelimit's ``RATELIMIT_ENABLE`` is on
    and ``RATELIMITS["MODE"]`` is not ``"off"`` (then no table is read, no policy written
    and Redis is not called)."""
    return (
        spec.limit is not None
        and spec.group is not None
        and getattr(settings, "RATELIMIT_ENABLE", True)
        and not mode.is_off()
    )


def _method_matches(policy: CompiledPolicy, request: Any) -> bool:
    return not policy.methods or request.method in policy.methods


def _ask(policy: CompiledPolicy, spec: Spec) -> pipeline.Ask:
    answers = spec.block and app_settings.DJANGO_RATELIMIT_BLOCK != RAISE
    return pipeline.Ask(ratelimit, policies=[policy], answers=answers)


def _settle(request: Any, passage: pipeline.Passage, policy: CompiledPolicy, spec: Spec) -> Any:
    """Set ``request.limited``; for a blocked request, the 429 to return, or raise."""
    over = any(
        decision.policy == policy.name and decision.enforce and not decision.allowed
        for decision in decisions_of(getattr(request, "_request", request))
    )
    request.limited = over or getattr(request, "limited", False)
    if not over or not spec.block:
        return None
    if passage.refusal is not None:
        return passage.refusal
    raise exception_class()()


def _marked(limited: Any, fn: Any, spec: Spec) -> Any:
    """``limited`` carrying ``spec`` (and the specs of the decorators under it)."""
    setattr(limited, SPEC_ATTRIBUTE, spec)
    setattr(limited, SPECS_ATTRIBUTE, (*getattr(fn, SPECS_ATTRIBUTE, ()), spec))
    return limited
