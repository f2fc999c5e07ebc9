"""django-ratelimit on ratelimits' policies: moving over is one import prefix.

::

    # from django_ratelimit.decorators import ratelimit
    from ratelimits.contrib.django_ratelimit.decorators import ratelimit

The package has django-ratelimit's layout: :mod:`.decorators` (``ratelimit``),
:mod:`.core` (``is_ratelimited``, ``get_usage``), :mod:`.exceptions` (``Ratelimited``),
:mod:`.middleware` (``RatelimitMiddleware``); each name is importable from here too.

    @ratelimit(key="ip", rate="5/m", method="POST")
    def login(request): ...

``group``, ``key``, ``rate``, ``method`` and ``block`` are read as django-ratelimit reads them
(its ``_SIMPLE_KEYS``, ``_PERIODS``, ``ALL``/``UNSAFE``, the view's dotted name as the
default group). The rate is a default: the first request writes it as a policy
(``dr-<group>-<key>-<methods>-<window>s``, endpoint the group, :mod:`.naming`) when none
exists, and from then on the policy in the database is the truth (:mod:`.policies`). See
docs/django-ratelimit.md.

The API ``manage.py ratelimits adopt`` uses:

- :func:`declared` → every :class:`Spec` decorated so far in this process (``group``,
  ``key``, ``rate``, ``method``, ``block`` as written; ``policy_key``, ``methods``,
  ``limit``, ``window`` as a policy reads them).
- :func:`policy_rows` ``(spec)`` → the rows, in the policy-file format of
  :mod:`ratelimits.tools.policy_files`, that express it (also ``spec.policy_rows()``, so
  code below this layer needs no import of it); ``spec.policy_name`` is its policy's name.
- a decorated view carries ``django_ratelimit_spec`` (its outermost ``@ratelimit``) and
  ``django_ratelimit_specs`` (every stacked one, innermost first); on a class-based view
  they sit on the method ``method_decorator`` wrapped (``dispatch``, ``get``...).
- :func:`specs_of` ``(view)`` → the specs of a view the URLconf holds (a function, or
  ``as_view()``), with the group django-ratelimit gives a class-based view's method.
"""

from __future__ import annotations

from typing import Any

from ratelimits.contrib.django_ratelimit.core import get_usage, is_ratelimited
from ratelimits.contrib.django_ratelimit.decorators import ratelimit
from ratelimits.contrib.django_ratelimit.exceptions import Ratelimited
from ratelimits.contrib.django_ratelimit.keys import ALL, UNSAFE
from ratelimits.contrib.django_ratelimit.naming import policy_rows
from ratelimits.contrib.django_ratelimit.spec import (
    SPECS_ATTRIBUTE,
    Spec,
    declared,
    group_on_class,
)

__all__ = [
    "ALL",
    "UNSAFE",
    "Ratelimited",
    "Spec",
    "declared",
    "get_usage",
    "is_ratelimited",
    "policy_rows",
    "ratelimit",
    "specs_of",
]


def specs_of(view: Any) -> list[Spec]:
    """The specs of ``view`` (a URL pattern's callback): a function view's, else those on
    its class's methods, each with the group django-ratelimit gives it there."""
    # as_view() copies dispatch's attributes onto the view: those without a group are
    # read again below, from the class, where the group is known.
    found = [spec for spec in getattr(view, SPECS_ATTRIBUTE, ()) if spec.group is not None]
    view_class = getattr(view, "view_class", None)
    if isinstance(view_class, type):
        for name in dir(view_class):
            holder = getattr(view_class, name, None)
            for spec in getattr(holder, SPECS_ATTRIBUTE, ()) if callable(holder) else ():
                found.append(spec.in_group(spec.group or group_on_class(holder, view_class)))
    return list(dict.fromkeys(found))
