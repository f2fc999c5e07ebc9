"""django-ratelimit's ``key`` and ``method`` as a policy's ``key`` and ``methods``.

``ip``, ``user``, ``user_or_ip`` and ``header:<name>`` are ratelimits' own key kinds of the
same names. A key ratelimits cannot express as a policy (a callable, ``get:``/``post:``
parameters, the dotted path of a function) is refused when the view is decorated.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured, ValidationError

from ratelimits.validators import HEADER_PREFIX, header_name, normalize_methods

#: django-ratelimit's ``ALL``: every method.
ALL = (None,)
#: django-ratelimit's ``UNSAFE``: the methods that change something.
UNSAFE = ["DELETE", "PATCH", "POST", "PUT"]
#: django-ratelimit's ``_SIMPLE_KEYS``, each a ratelimits key kind of the same name.
SIMPLE_KEYS = ("ip", "user", "user_or_ip")

_SUPPORTED = "'ip', 'user', 'user_or_ip' and 'header:<name>'"


def policy_key(key: Any) -> str:
    """The policy ``key`` for django-ratelimit's ``key``; ``ImproperlyConfigured`` naming
    what is supported for any other."""
    if key is None or key == "":
        why = "a key is needed (django-ratelimit refuses a view without one too)"
    elif callable(key):
        why = "a callable key computes its value per request, which a policy cannot hold"
    elif not isinstance(key, str):
        why = "a key is a string"
    elif key in SIMPLE_KEYS:
        return key
    elif key.startswith(HEADER_PREFIX):
        if header_name(key) is not None:
            return key
        why = "the header name is not a valid HTTP field name"
    elif key.split(":", 1)[0] in ("get", "post"):
        why = "ratelimits does not count clients by a query or form parameter"
    elif "." in key:
        why = "a dotted path names a key function, which a policy cannot hold"
    else:
        why = "django-ratelimit does not know this key either"
    raise ImproperlyConfigured(
        f"ratelimits.contrib.django_ratelimit.ratelimit(key={key!r}): {why}. Supported "
        f"keys: {_SUPPORTED}; see docs/django-ratelimit.md."
    )


def policy_methods(method: Any) -> tuple[str, ...]:
    """The methods django-ratelimit's ``method`` limits, upper case in ratelimits' order
    (``()``: every method); ``ImproperlyConfigured`` for a method HTTP does not know."""
    if method is None or method == ALL:
        return ()
    given = [method] if not isinstance(method, (list, tuple)) else list(method)
    if not all(isinstance(m, str) for m in given):
        raise _bad_method(method, "methods are strings such as 'POST'")
    try:
        normal = normalize_methods(",".join(given))
    except ValidationError as error:
        raise _bad_method(method, error.messages[0]) from None
    return tuple(normal.split(",")) if normal else ()


def _bad_method(method: Any, why: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(
        f"ratelimits.contrib.django_ratelimit.ratelimit(method={method!r}): {why}. Use "
        "ALL, UNSAFE, a method or a list of methods."
    )
