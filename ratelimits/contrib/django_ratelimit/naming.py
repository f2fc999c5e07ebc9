"""The policy a spec writes: its name, and its row in the policy-file format of
:mod:`ratelimits.tools.policy_files`.

A spec's policy is named ``dr-<group>-<key>-<methods>-<count>-<window>s``, e.g.
``dr-accounts-views-login-ip-post-5-60s`` for ``@ratelimit(key="ip", rate="5/m",
method="POST")`` on ``accounts.views.login``: django-ratelimit keeps one counter per group,
key, methods and rate (count and period), and so does one policy. The count in the name
is the code's; the policy's ``limit`` is the operator's to edit. A key computed in code
is named by a digest of what it is (``c_<digest>``). A group that is not a plain dotted
name, and a name that would pass 64 characters, get a short digest so that two groups
never share a name. The endpoint is the name too: no URL name, view path or throttle
scope is one, so ``RateLimitMiddleware`` never decides these policies unless an operator
points one at a view.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from django.conf import settings

from ratelimits.validators import MAX_IPV6_PREFIX, MIN_IPV6_PREFIX

#: The prefix of every policy name the decorator writes.
PREFIX = "dr-"
#: The algorithm of the policies written: django-ratelimit counts per fixed window too.
ALGORITHM = "fixed_window"
_NAME_LENGTH = 64
_DOTTED = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*\Z")
_PLAIN_HEADER = re.compile(r"[A-Za-z0-9_-]+\Z")
_OTHER = re.compile(r"[^A-Za-z0-9_]+")
_UNSAFE = ("POST", "PUT", "PATCH", "DELETE")


def policy_name(spec: Any) -> str:
    """The policy name of ``spec`` (a :class:`~.spec.Spec`): a valid ``Policy.name``;
    ``ValueError`` for a spec without its group."""
    group, window = spec.group, spec.window
    if group is None:
        raise ValueError(
            "the group of a class-based view's method is known from its class: read the "
            "view's specs with ratelimits.contrib.django_ratelimit.specs_of(view)"
        )
    key = _code_key_part(spec.key) if spec.code_key else _key_part(spec.policy_key)
    tail = f"-{key}-{_methods_part(spec.methods)}-{spec.limit}-{window}s"
    name = f"{PREFIX}{_group_part(group)}{tail}"
    if len(name) <= _NAME_LENGTH:
        return name
    digest = _digest(repr((group, key, spec.methods, spec.limit, window)))
    room = _NAME_LENGTH - len(PREFIX) - len(tail) - len(digest) - 1
    if room < 8:
        tail, room = "", _NAME_LENGTH - len(PREFIX) - len(digest) - 1
    return f"{PREFIX}{_group_part(group)[:room].rstrip('-_')}-{digest}{tail}"


def policy_rows(spec: Any) -> list[dict[str, Any]]:
    """The rows of :mod:`ratelimits.tools.policy_files` that express ``spec``: one policy, or
    none for ``rate=None`` (no limit), a rate computed per request (known only then) and
    ``0/m`` (every request denied, by the decorator: no policy); ``ValueError`` for a
    spec without its group (see :func:`ratelimits.contrib.django_ratelimit.specs_of`).
    Fields a row leaves out take the model's defaults. ``fail_open`` is
    django-ratelimit's ``RATELIMIT_FAIL_OPEN`` (False unless set), and ``ipv6_prefix``
    its ``RATELIMIT_IPV6_MASK`` when set."""
    if not spec.limit:
        return []
    name = policy_name(spec)
    row: dict[str, Any] = {
        "name": name,
        "endpoint": name,
        "methods": ",".join(spec.methods),
        "algorithm": ALGORITHM,
        "limit": spec.limit,
        "window": spec.window,
        "key": spec.policy_key,
        "fail_open": bool(getattr(settings, "RATELIMIT_FAIL_OPEN", False)),
    }
    mask = getattr(settings, "RATELIMIT_IPV6_MASK", None)
    if type(mask) is int and MIN_IPV6_PREFIX <= mask <= MAX_IPV6_PREFIX:
        row["ipv6_prefix"] = mask
    return [row]


def _group_part(group: str) -> str:
    if _DOTTED.match(group):
        return group.replace(".", "-")
    return f"{_OTHER.sub('-', group).strip('-')}-{_digest(group)}".lstrip("-")


def _key_part(key: str) -> str:
    if not key.startswith("header:"):
        return key
    header = key[len("header:") :]
    part = "h_" + _OTHER.sub("_", header.lower().replace("-", "_"))
    if _PLAIN_HEADER.match(header) and len(part) <= 24:
        return part  # Django reads X-Api-Key, x-api-key and X_Api_Key as one header
    return f"{part[:12]}_{_digest(header.lower())}"


def _code_key_part(key: Any) -> str:
    if callable(key):
        qualname = getattr(key, "__qualname__", type(key).__qualname__)
        described = f"{getattr(key, '__module__', '')}.{qualname}"
    else:
        described = str(key)
    return f"c_{_digest(described)[:8]}"


def _methods_part(methods: tuple[str, ...]) -> str:
    if not methods:
        return "all"
    if sorted(methods) == sorted(_UNSAFE):
        return "unsafe"
    return "_".join(method.lower() for method in methods)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]
