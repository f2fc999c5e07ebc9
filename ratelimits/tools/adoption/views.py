"""The URLconf's views as adoption sees them: each URL pattern with its DRF throttles and
``throttle_scope`` (as DRF reads them: the view class's attributes, or what ``as_view()``
or a router's ``@action`` gave it), and the django-ratelimit spec a view carries."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.urls import get_resolver
from rest_framework.views import APIView

from ratelimits.http.view_asks import scope_of
from ratelimits.tools.endpoints.urlconf import Route, initkwargs, view_class_of, walk

#: The attributes ``ratelimits.contrib.django_ratelimit.ratelimit`` leaves on a view: the
#: spec of its outermost decorator, and the specs of all those stacked on it.
SPEC_ATTRIBUTE = "django_ratelimit_spec"
SPECS_ATTRIBUTE = "django_ratelimit_specs"


@dataclass(frozen=True, slots=True)
class View:
    """One URL pattern and what throttles it."""

    route: Route
    name: str | None
    #: DRF's throttle classes on it (``None``: not a DRF view).
    throttles: tuple[Any, ...] | None
    #: The scope a policy can match it by: its ``throttle_scope``, or the decorator's.
    scope: str | None
    #: Its throttle classes are DRF's ``DEFAULT_THROTTLE_CLASSES``.
    by_default: bool
    #: It overrides ``get_throttles()``: its throttles are decided at run time.
    decides_throttles: bool
    #: The django-ratelimit specs it carries (one per stacked decorator).
    specs: tuple[Any, ...]

    @property
    def label(self) -> str:
        """``/api/items/ (api:item-list)``: how reports name the view."""
        path = self.route.path or "(a path Django cannot reverse)"
        return f"{path} ({self.name})" if self.name else path

    @property
    def is_drf(self) -> bool:
        return self.throttles is not None


#: A URL pattern's callback to the django-ratelimit specs it carries (the faces' package
#: reads them: ``ratelimits.contrib.django_ratelimit.specs_of``).
SpecsOf = Callable[[Any], Sequence[Any]]


def site_views(urlconf: str | None = None, specs_of: SpecsOf | None = None) -> list[View]:
    """Every URL pattern of ``urlconf`` (``ROOT_URLCONF`` by default), in URLconf order;
    ``specs_of`` finds each view's django-ratelimit specs (default: those on the callback,
    its class or its ``dispatch``)."""
    return list(_views(walk(get_resolver(urlconf)), specs_of))


def _views(entries: Iterable[Any], specs_of: SpecsOf | None) -> Iterable[View]:
    for entry in entries:
        callback = entry.pattern.callback
        view_class = view_class_of(callback)
        given = initkwargs(callback)
        specs = tuple(specs_of(callback)) if specs_of else _specs_of(callback, view_class)
        if isinstance(view_class, type) and issubclass(view_class, APIView):
            classes = given.get("throttle_classes", view_class.throttle_classes)
            scope = given.get("throttle_scope", getattr(view_class, "throttle_scope", None))
            yield View(
                route=entry.route,
                name=entry.name,
                throttles=tuple(classes),
                scope=scope if isinstance(scope, str) and scope else None,
                by_default=classes is APIView.throttle_classes,
                decides_throttles=view_class.get_throttles is not APIView.get_throttles,
                specs=specs,
            )
        else:
            yield View(entry.route, entry.name, None, scope_of(callback), False, False, specs)


def _specs_of(callback: Any, view_class: Any) -> tuple[Any, ...]:
    """The django-ratelimit specs of a function view, or of a class-based view's class or
    ``dispatch``."""
    for holder in (callback, view_class, getattr(view_class, "dispatch", None)):
        specs = getattr(holder, SPECS_ATTRIBUTE, None)
        if isinstance(specs, tuple) and specs:
            return specs
        spec = getattr(holder, SPEC_ATTRIBUTE, None)
        if spec is not None:
            return (spec,)
    return ()


#: How Django spells the parameter of DRF's format suffix patterns in a route's path.
FORMAT_PARAMETER = "<format>"


def distinct_routes(views: Iterable[View]) -> list[str]:
    """The labels of ``views``, each once, without the ``.<format>`` twin DRF's
    ``format_suffix_patterns`` (and a router) adds next to a route of the same name."""
    views = list(views)
    plain = {view.name for view in views if FORMAT_PARAMETER not in view.route.path}
    found: dict[str, None] = {}
    for view in views:
        if FORMAT_PARAMETER in view.route.path and view.name is not None and view.name in plain:
            continue
        found.setdefault(view.label)
    return list(found)
