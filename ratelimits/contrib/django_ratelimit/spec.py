"""What one ``@ratelimit(...)`` declares (:class:`Spec`), the group django-ratelimit gives a
view that names none, and the specs declared so far."""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, replace
from typing import Any

import ratelimits.contrib.django_ratelimit.naming as naming

#: The attribute a decorated view carries: the spec of its outermost ``@ratelimit``.
SPEC_ATTRIBUTE = "django_ratelimit_spec"
#: The attribute a decorated view carries: every stacked ``@ratelimit``'s spec, innermost
#: first.
SPECS_ATTRIBUTE = "django_ratelimit_specs"


@dataclass(frozen=True, slots=True)
class Spec:
    """One ``@ratelimit(group, key, rate, method, block)`` as written, with what it means
    for a policy: ``key`` as a policy key (``code_key``: computed per request by code),
    ``methods`` (``()``: every method), ``limit`` and ``window`` (``None``: ``rate=None``,
    no limit, or a rate computed per request: :meth:`with_rate` gives the spec of each
    rate it gives; a limit of 0 denies every request).

    ``group`` is ``None`` only on a class-based view's method decorated with
    ``method_decorator`` and no group: django-ratelimit names it after the class it is
    called on, known from the view (:func:`ratelimits.contrib.django_ratelimit.specs_of`)."""

    group: str | None
    key: Any
    rate: Any
    method: Any
    block: bool
    policy_key: str
    methods: tuple[str, ...]
    limit: int | None
    window: int | None
    code_key: bool = False

    def in_group(self, group: str) -> Spec:
        """This spec with ``group``."""
        return replace(self, group=group)

    def with_rate(self, limit: int, window: int) -> Spec:
        """This spec at the rate ``limit`` per ``window`` (a rate computed per request)."""
        return replace(self, limit=limit, window=window)

    @property
    def per_request(self) -> bool:
        """True when the rate is computed per request (a callable or its dotted path)."""
        return self.rate is not None and self.limit is None

    @property
    def policy_name(self) -> str:
        """The name of the policy this spec writes (:func:`.naming.policy_name`)."""
        return naming.policy_name(self)

    def policy_rows(self) -> list[dict[str, Any]]:
        """The policy rows, in the policy-file format, that express this spec
        (:func:`.naming.policy_rows`)."""
        return naming.policy_rows(self)


def default_group(fn: Any) -> str | None:
    """The group django-ratelimit gives a view decorated without one: its dotted name
    (``module.qualname``; for a method, ``module.<class called on>.qualname``). ``None``
    for the stand-in ``method_decorator`` decorates once to copy attributes."""
    if isinstance(fn, functools.partial):
        fn = fn.func
    if getattr(fn, "__module__", None) == "django.utils.decorators" and (
        getattr(fn, "__name__", None) == "dummy"
    ):
        return None
    parts = []
    if hasattr(fn, "__module__"):
        parts.append(fn.__module__)
    if hasattr(fn, "__self__"):
        parts.append(fn.__self__.__class__.__name__)
    parts.append(fn.__qualname__)
    return ".".join(parts)


def group_on_class(holder: Any, view_class: type) -> str:
    """django-ratelimit's group for a method of ``view_class`` that ``method_decorator``
    wrapped (``holder``, which carries the original method's module and qualname)."""
    return f"{holder.__module__}.{view_class.__name__}.{holder.__qualname__}"


_declared: dict[Spec, None] = {}
_lock = threading.Lock()


def declare(spec: Spec) -> None:
    """Remember ``spec`` (once) for :func:`declared`."""
    if spec.group is not None and spec not in _declared:
        with _lock:
            _declared[spec] = None


def declared() -> list[Spec]:
    """Every spec with a group decorated so far in this process, in the order first seen."""
    with _lock:
        return list(_declared)
