"""DRF's throttle classes read as DRF runs them: which counter each one keeps, at what rate,
and whom it counts; or why ratelimits cannot do the same.

A ``SimpleRateThrottle`` keeps a sliding log of admission times under the cache key
``throttle_<scope>_<ident>``, whatever the view: every view using a throttle of one scope
shares its counter. ``AnonRateThrottle`` counts anonymous requests by address and lets
authenticated ones through; ``UserRateThrottle`` and ``ScopedRateThrottle`` count a user
by id and an anonymous request by address (the scoped one under the view's
``throttle_scope``, at that scope's rate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rest_framework.throttling import (
    AnonRateThrottle,
    BaseThrottle,
    ScopedRateThrottle,
    SimpleRateThrottle,
    UserRateThrottle,
)

from ratelimits.tools.adoption.rates import parse_rate

#: Whom each DRF throttle counts: a user by id, an anonymous request by address (``user``);
#: only anonymous requests, by address (``anon``).
USER, ANON = "user", "anon"
_KNOWN = {AnonRateThrottle: ANON, UserRateThrottle: USER, ScopedRateThrottle: USER}
#: What a subclass may set and still be read as its DRF base: a scope, a rate, the rates.
_SETTABLE = frozenset({"scope", "rate", "THROTTLE_RATES"})
#: What every class has in its namespace.
_CLASS_NAMESPACE = frozenset(
    {
        "__module__",
        "__qualname__",
        "__doc__",
        "__dict__",
        "__weakref__",
        "__annotations__",
        "__firstlineno__",
        "__static_attributes__",
        "__orig_bases__",
        "__parameters__",
    }
)


@dataclass(frozen=True, slots=True)
class Counter:
    """One DRF counter a view's throttle spends: its scope, whom it counts, its rate."""

    throttle: type
    scope: str
    counts: str  # USER or ANON
    rate: str
    limit: int
    window: int

    @property
    def throttle_name(self) -> str:
        return self.throttle.__name__


class NotAdoptable(Exception):
    """A throttle ratelimits cannot replace exactly; the message says why."""


def is_policy_throttle(throttle: Any) -> bool:
    """Whether ``throttle`` is ratelimits' own (``PolicyThrottle`` or a subclass)."""
    return bool(getattr(throttle, "applies_ratelimits_policies", False))


def read_throttle(throttle: Any, view_scope: str | None) -> Counter | None:
    """The counter ``throttle`` keeps on a view whose ``throttle_scope`` is ``view_scope``;
    ``None`` when it throttles nothing there (a rate of ``None``, a scoped throttle on a
    view without a scope). :class:`NotAdoptable` when ratelimits cannot do the same."""
    if not isinstance(throttle, type) or not issubclass(throttle, BaseThrottle):
        raise NotAdoptable("it is not a DRF throttle class")
    if not issubclass(throttle, SimpleRateThrottle):
        raise NotAdoptable(
            "it is not a SimpleRateThrottle: its allow_request() is its own, and ratelimits "
            "cannot tell what it admits"
        )
    base = _drf_base(throttle)
    if throttle is not base:
        _check_only_settings(throttle, base)
    if base is ScopedRateThrottle:
        # DRF takes the scope from the view and the rate from the rates, whatever the
        # class sets.
        if not view_scope:
            return None
        scope, rate = view_scope, _rate_of_scope(throttle, view_scope)
    else:
        scope = getattr(throttle, "scope", None)
        rate = getattr(throttle, "rate", None) or _rate_of_scope(throttle, scope)
    if rate is None:
        return None  # DRF admits every request
    try:
        limit, window = parse_rate(rate)
    except ValueError as e:
        raise NotAdoptable(str(e)) from None
    return Counter(throttle, str(scope), _KNOWN[base], rate, limit, window)


def _drf_base(throttle: type) -> type:
    """The first of DRF's anon, user and scoped throttles ``throttle`` derives from."""
    for klass in throttle.__mro__:
        if klass in _KNOWN:
            return klass
    defines = _own_methods(throttle) or ["get_cache_key"]
    raise NotAdoptable(
        f"it defines its own {', '.join(defines)}: ratelimits cannot tell whom it counts"
    )


def _check_only_settings(throttle: type, base: type) -> None:
    """:class:`NotAdoptable` unless every class between ``throttle`` and ``base`` sets only
    a scope, a rate or the rates."""
    for klass in throttle.__mro__[: throttle.__mro__.index(base)]:
        own = [name for name in vars(klass) if name not in _CLASS_NAMESPACE]
        methods = [name for name in own if _is_code(vars(klass)[name])]
        if methods:
            raise NotAdoptable(
                f"{klass.__name__} defines {', '.join(methods)}: ratelimits cannot tell "
                "what its own code admits"
            )
        others = [name for name in own if name not in _SETTABLE]
        if others:
            raise NotAdoptable(
                f"{klass.__name__} sets {', '.join(others)}: only a throttle that sets its "
                "scope or rate is read as DRF's"
            )


def _own_methods(throttle: type) -> list[str]:
    found = []
    for klass in throttle.__mro__:
        if klass is SimpleRateThrottle:
            break
        found += [name for name, value in vars(klass).items() if _is_code(value)]
    return found


def _is_code(value: object) -> bool:
    return callable(value) or isinstance(value, (classmethod, staticmethod, property))


def _rate_of_scope(throttle: Any, scope: object) -> str | None:
    """The rate of ``scope`` as DRF reads it: from the throttle class's ``THROTTLE_RATES``
    (``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``, as DRF bound it when first imported)."""
    rates = throttle.THROTTLE_RATES
    if not scope:
        raise NotAdoptable("it sets neither a scope nor a rate (DRF refuses it)")
    if scope not in rates:
        raise NotAdoptable(
            f"DEFAULT_THROTTLE_RATES has no rate for its scope {scope!r} (DRF refuses it)"
        )
    return rates[scope]  # type: ignore[no-any-return]
