"""What a view asks of the face pipeline (:mod:`ratelimits.http.pipeline`): its scope
and cost, and whether its framework's own throttle decides its policies.

:func:`check` (or :func:`acheck` from a coroutine) runs the pipeline for a request and
returns its verdict. Policies already decided for the request, by another face, are left
out, so a request spends one unit per policy whichever faces it meets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ratelimits.engine.decision import Verdict
from ratelimits.http import pipeline

#: The marker a DRF throttle class carries when it applies the policies itself, after
#: DRF's authentication: :class:`~ratelimits.throttling.PolicyThrottle`.
APPLIES_POLICIES = "applies_ratelimits_policies"


def check(
    request: Any,
    scope: str | None,
    sender: object,
    cost: Any = None,
    *,
    before_authentication: bool = False,
) -> Verdict | None:
    """Decide the policies ``request`` falls under that no face has decided yet;
    ``None`` when there are none. ``cost`` is the view's ``ratelimit_cost`` (see
    :func:`ratelimits.http.request_facts.request_cost`). A denial sends ``request_throttled``
    from ``sender``, an admission that takes a policy near its limit
    ``request_near_limit``.

    ``before_authentication`` decides only the policies that count failures, for a view
    whose framework authenticates it later (:func:`delegated_scope`): a wrong credential
    is then counted, and an attempt over the limit is refused before any credential is
    checked. Such a policy counts a client as it is known before that authentication
    (a session's user, else its address); the framework's throttle decides the rest."""
    ask = pipeline.Ask(sender, scope, cost, before_authentication)
    return pipeline.run(request, ask).verdict


async def acheck(
    request: Any,
    scope: str | None,
    sender: object,
    cost: Any = None,
    *,
    before_authentication: bool = False,
) -> Verdict | None:
    """:func:`check` from a coroutine: the user is loaded with ``request.auser()`` and
    the call is made on the running loop, with no thread in between."""
    ask = pipeline.Ask(sender, scope, cost, before_authentication)
    return (await pipeline.arun(request, ask)).verdict


def check_face_options(face: str, scope: object, cost: object, *, scope_required: bool) -> None:
    """Raise ``TypeError`` for a face's bad ``scope`` (a policy endpoint name; ``None``
    only where it is optional) or ``cost`` (a whole number of at least 1, or a callable
    of the request), naming ``face`` as the user wrote it."""
    if (scope is not None or scope_required) and (not isinstance(scope, str) or not scope.strip()):
        raise TypeError(f"{face}(scope=...) needs a policy endpoint name, not {scope!r}.")
    if cost is not None and not callable(cost) and (type(cost) is not int or cost < 1):
        raise TypeError(f"{face}(cost=...) needs a whole number of at least 1, not {cost!r}.")


def middleware_scope(view_func: Any, method: str) -> tuple[str | None, bool]:
    """What ``RateLimitMiddleware`` decides for a view: ``(scope, before_authentication)``.
    A view whose framework's throttle decides its policies (:func:`delegated_scope`) gets
    only its failures policies, before that framework authenticates, by the throttle's
    scope; any other view all its policies, by the decorator's scope."""
    delegated = delegated_scope(view_func, method)
    if delegated is None:
        return scope_of(view_func), False
    return delegated or None, True


def scope_of(view_func: Any) -> str | None:
    """The scope :func:`ratelimits.decorators.ratelimit` gave a view: a function view's,
    or a class-based view's ``dispatch`` (through ``method_decorator``)."""
    return _view_attribute(view_func, "ratelimit_scope")  # type: ignore[no-any-return]


def cost_of(view_func: Any) -> Any:
    """A view's ``ratelimit_cost`` (an int or a callable): set by the decorator, or on a
    class-based view (its class or its ``dispatch``); ``None`` when the view sets none."""
    return _view_attribute(view_func, "ratelimit_cost")


def _view_attribute(view_func: Any, name: str) -> Any:
    found = getattr(view_func, name, None)
    if found is None:
        view_class = getattr(view_func, "view_class", None)
        if view_class is not None:
            found = getattr(view_class, name, None)
            if found is None:
                found = getattr(getattr(view_class, "dispatch", None), name, None)
    return found


#: Tests for views whose framework's face decides the policies itself, after the
#: framework's own authentication: ``(view_func, method) -> scope``, where the scope is
#: ``None`` for a view the face does not decide, else the face's scope (``""``: none). A
#: face registers its own (:func:`decided_after_authentication`); DRF's is built in.
_FrameworkTest = Callable[[Any, str], "str | None"]
_after_authentication: list[_FrameworkTest] = []


def decided_after_authentication(test: _FrameworkTest) -> _FrameworkTest:
    """Register ``test``: ``RateLimitMiddleware`` leaves the views it accepts to their
    framework's face (django-ninja's ``PolicyThrottle`` registers one)."""
    if test not in _after_authentication:
        _after_authentication.append(test)
    return test


def applies_policies_itself(view_func: Any, method: str) -> bool:
    """True for a view whose framework's throttle decides its policies itself, once the
    framework has authenticated the request (a token's user, or an API key, is known
    only then): a DRF view under ``PolicyThrottle``, or a registered face's view."""
    return delegated_scope(view_func, method) is not None


def delegated_scope(view_func: Any, method: str) -> str | None:
    """For a view whose framework's throttle decides its policies
    (:func:`applies_policies_itself`), the scope that throttle matches by (a DRF view's
    ``throttle_scope``; ``""`` when it has none); ``None`` for any other view."""
    view_class = getattr(view_func, "cls", None)  # DRF's as_view() sets it
    if view_class is not None:
        throttles = getattr(view_class, "throttle_classes", ())
        if any(getattr(throttle, APPLIES_POLICIES, False) for throttle in throttles):
            return getattr(view_class, "throttle_scope", None) or ""
        return None
    for test in _after_authentication:
        scope = test(view_func, method)
        if scope is not None:
            return scope
    return None
