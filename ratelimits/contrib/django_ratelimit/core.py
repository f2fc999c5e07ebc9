"""django-ratelimit's ``core``: :func:`is_ratelimited`, :func:`get_usage`, and the helpers
its users import (``_split_rate``, ``_get_ip``), on ratelimits' policies.

``get_usage(request, group=None, fn=None, key=None, rate=None, method=ALL,
increment=False)`` reads the request's usage of the policy the arguments describe (the
one a ``@ratelimit`` with them writes), spending nothing unless ``increment``.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from django.core.exceptions import ImproperlyConfigured

import ratelimits.contrib.django_ratelimit.deciding as deciding
import ratelimits.contrib.django_ratelimit.keys as keys
import ratelimits.contrib.django_ratelimit.rates as rates
from ratelimits.contrib.django_ratelimit.counting import counted, peeked
from ratelimits.contrib.django_ratelimit.identities import masked, meta_address
from ratelimits.contrib.django_ratelimit.keys import ALL, UNSAFE
from ratelimits.contrib.django_ratelimit.spec import Spec, default_group

__all__ = ["get_usage", "is_ratelimited"]


def _split_rate(rate: Any) -> tuple[int, int]:
    """``(count, seconds)`` of a rate, as django-ratelimit reads it."""
    return rates.split_rate(rate)


def _get_ip(request: Any) -> str:
    """The client address as django-ratelimit's ``_get_ip`` gives it: per
    ``RATELIMIT_IP_META_KEY`` (ratelimits' own address when unset), masked by
    ``RATELIMIT_IPV4_MASK`` / ``RATELIMIT_IPV6_MASK``; ``ImproperlyConfigured`` when there is
    none."""
    return masked(meta_address(request))


def is_ratelimited(
    request: Any,
    group: str | None = None,
    fn: Any = None,
    key: Any = None,
    rate: Any = None,
    method: Any = ALL,
    increment: bool = False,
) -> bool:
    """True when ``request`` is over the limit the arguments describe (see
    :func:`get_usage`)."""
    usage = get_usage(request, group, fn, key, rate, method, increment)
    return False if usage is None else bool(usage["should_limit"])


def get_usage(
    request: Any,
    group: str | None = None,
    fn: Any = None,
    key: Any = None,
    rate: Any = None,
    method: Any = ALL,
    increment: bool = False,
) -> dict[str, Any] | None:
    """``{"count", "limit", "should_limit", "time_left"}`` for ``request`` under the policy
    of ``@ratelimit(group, key, rate, method)`` on ``fn``; ``None`` when nothing limits it
    (no rate, another method, ``RATELIMIT_ENABLE`` off, a disabled policy).

    ``count`` is the requests counted in the window, this one included when
    ``increment`` spends it; ``should_limit`` is True when this request is over the
    limit (``increment``) or the next one would be (a look); ``time_left`` the seconds
    until a unit frees up. A look that Redis cannot answer limits nothing (``None``, as
    django-ratelimit's look at a failing cache); a spend gets the policy's fail mode."""
    if group is None and fn is None:
        raise ImproperlyConfigured("get_usage must be called with either `group` or `fn`")
    if group is None:
        group = default_group(fn.func if isinstance(fn, functools.partial) else fn)
    if not deciding.enabled():
        return None
    spec = _spec(group or "", key, rate, method)
    found = deciding.applied(spec, request)
    if found is None:
        return None
    if found.policy is None:  # 0/m
        return {"count": int(increment), "limit": 0, "should_limit": True, "time_left": -1}
    checks = deciding.checks(found, request)
    if not checks:
        return None
    verdict = counted(checks) if increment else peeked(checks)
    deciding.settled(request, found, verdict if increment else None)
    (decision,) = verdict.decisions
    if decision.failed:
        if not increment or decision.allowed:
            return None
        return {"count": 0, "limit": 0, "should_limit": True, "time_left": -1}
    return {
        "count": int(decision.count) + int(increment),
        "limit": decision.limit,
        "should_limit": not decision.allowed,
        "time_left": math.ceil(decision.reset if decision.allowed else decision.retry_after),
    }


is_ratelimited.ALL = ALL  # type: ignore[attr-defined]
is_ratelimited.UNSAFE = UNSAFE  # type: ignore[attr-defined]
get_usage.ALL = ALL  # type: ignore[attr-defined]
get_usage.UNSAFE = UNSAFE  # type: ignore[attr-defined]


def _spec(group: str, key: Any, rate: Any, method: Any) -> Spec:
    """The spec a ``@ratelimit(group, key, rate, method)`` declares."""
    parsed = rates.parse_rate(rate)
    limit, window = parsed if isinstance(parsed, tuple) else (None, None)
    policy_key = keys.policy_key(key) if key not in (None, "") else ""
    written = tuple(method) if isinstance(method, list) else method
    methods = keys.policy_methods(method)
    return Spec(
        group, key, rate, written, True, policy_key, methods, limit, window, keys.is_code_key(key)
    )
