"""django-ratelimit's ``key`` and ``method`` as a policy's ``key`` and ``methods``.

``ip``, ``user``, ``user_or_ip`` and ``header:<name>`` are ratelimits' own key kinds of the
same names. A key whose value only code can compute (a callable ``(group, request)``, the
dotted path of one, ``get:<name>`` and ``post:<name>``) is computed per request as
django-ratelimit computes it (:func:`key_value`); its policy holds the key
:data:`CODE_KEY` until an operator gives it one of ratelimits' own kinds.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.utils.module_loading import import_string

from ratelimits.validators import HEADER_PREFIX, header_name, normalize_methods

#: django-ratelimit's ``ALL``: every method.
ALL = (None,)
#: django-ratelimit's ``UNSAFE``: the methods that change something.
UNSAFE = ["DELETE", "PATCH", "POST", "PUT"]
#: django-ratelimit's ``_SIMPLE_KEYS``, each a ratelimits key kind of the same name.
SIMPLE_KEYS = ("ip", "user", "user_or_ip")
#: django-ratelimit's accessor keys read from the query string and the form.
PARAMETER_KEYS = ("get", "post")
#: The key a policy holds for a key computed in code: who counts is what the code says,
#: until an operator sets another key in the admin.
CODE_KEY = "global"

_SUPPORTED = (
    "'ip', 'user', 'user_or_ip', 'header:<name>', 'get:<name>', 'post:<name>', a "
    "callable (group, request) or its dotted path"
)


def is_code_key(key: Any) -> bool:
    """True for a key computed per request by code (see the module)."""
    if callable(key):
        return True
    if not isinstance(key, str) or key in SIMPLE_KEYS:
        return False
    if ":" in key:
        return key.split(":", 1)[0] in PARAMETER_KEYS
    return "." in key


def policy_key(key: Any) -> str:
    """The policy ``key`` for django-ratelimit's ``key`` (:data:`CODE_KEY` for one computed
    in code); ``ImproperlyConfigured`` naming what is supported for any other, and for
    none (django-ratelimit refuses it when the view is called: so does the decorator)."""
    if is_code_key(key):
        return CODE_KEY
    if key is None or key == "":
        why = "a key is needed (django-ratelimit refuses a view without one too)"
    elif not isinstance(key, str):
        why = "a key is a string or a callable"
    elif key in SIMPLE_KEYS:
        return key
    elif key.startswith(HEADER_PREFIX):
        if header_name(key) is not None:
            return key
        why = "the header name is not a valid HTTP field name"
    else:
        why = "django-ratelimit does not know this key either"
    raise ImproperlyConfigured(
        f"ratelimits.contrib.django_ratelimit.ratelimit(key={key!r}): {why}. Supported "
        f"keys: {_SUPPORTED}; see docs/django-ratelimit.md."
    )


def key_value(key: Any, group: str, request: Any) -> str:
    """The value of a key computed in code for ``request``, as django-ratelimit reads it:
    a callable's (or dotted path's) ``(group, request)``, a query or form parameter
    (``""`` when absent)."""
    if callable(key):
        return str(key(group, request))
    accessor, _, name = key.partition(":")
    if accessor == "get" and name:
        return str(request.GET.get(name, ""))
    if accessor == "post" and name:
        return str(request.POST.get(name, ""))
    return str(import_string(key)(group, request))


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
