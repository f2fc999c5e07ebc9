"""django-ratelimit's ``rate`` read as django-ratelimit reads it: ``"5/m"`` is 5 requests a
minute, ``"10/5m"`` 10 every five minutes, ``"100/10"`` 100 every ten seconds, a tuple
``(count, seconds)`` is taken as it is, ``"0/m"`` denies every request and ``None`` limits
nothing. A callable ``(group, request)``, or the dotted path of one, gives the rate per
request (:func:`rate_of`)."""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from ratelimits.validators import MAX_LIMIT, MAX_WINDOW

#: django-ratelimit's ``rate_re``: a count, ``/``, an optional multiple, an optional unit.
RATE = re.compile(r"([\d]+)/([\d]*)([smhd])?")
#: django-ratelimit's ``_PERIODS``: the seconds of each unit (none: seconds).
PERIODS = {"s": 1, "m": 60, "h": 60 * 60, "d": 24 * 60 * 60}
#: What :func:`parse_rate` gives for a rate known only per request.
PER_REQUEST = "per request"

_SUPPORTED = (
    "a rate such as '5/m', '100/h', '1000/d', '10/5m' or '0/m', a tuple (count, seconds), "
    "None (no limit), or a callable (group, request) giving one (or its dotted path)"
)


def is_per_request(rate: Any) -> bool:
    """True for a rate computed per request: a callable, or the dotted path of one."""
    return callable(rate) or (isinstance(rate, str) and "." in rate)


def split_rate(rate: Any) -> tuple[int, int]:
    """``(count, seconds)`` of a rate text or tuple, as django-ratelimit's ``_split_rate``
    reads it; ``ImproperlyConfigured`` for anything else."""
    return _checked(rate, _split(rate))


def parse_rate(rate: Any) -> tuple[int, int] | str | None:
    """``(limit, window)`` of ``rate`` when the view is decorated; ``None`` for ``None``
    (no limit), :data:`PER_REQUEST` for a callable or dotted path. A limit of 0 denies
    every request. ``ImproperlyConfigured`` for text django-ratelimit would misread (it
    reads ``"5/M"`` as 5 a second) and a window no policy can hold (above 30 days)."""
    if rate is None:
        return None
    if is_per_request(rate):
        return PER_REQUEST
    return split_rate(rate)


def rate_of(rate: Any, group: str, request: Any) -> tuple[int, int] | None:
    """``(limit, window)`` of ``rate`` for ``request``: a callable (or its dotted path) is
    called with ``(group, request)``, as django-ratelimit calls it; ``None``: no limit."""
    if callable(rate):
        rate = rate(group, request)
    elif isinstance(rate, str) and "." in rate:
        rate = import_string(rate)(group, request)
    return None if rate is None else split_rate(rate)


def _split(rate: Any) -> tuple[int, int] | None:
    if isinstance(rate, tuple) and len(rate) == 2 and all(type(n) is int for n in rate):
        return rate[0], rate[1]
    found = RATE.fullmatch(rate) if isinstance(rate, str) else None
    if found is None:
        return None
    count, multiple, unit = found.groups()
    return int(count), PERIODS[unit or "s"] * int(multiple or 1)


def _checked(rate: Any, parsed: tuple[int, int] | None) -> tuple[int, int]:
    if parsed is None:
        raise _refused(rate, "it is not a rate django-ratelimit reads")
    limit, window = parsed
    if window < 1:
        raise _refused(rate, "its period is 0 seconds")
    if window > MAX_WINDOW:
        raise _refused(rate, f"a policy's window is at most 30 days ({MAX_WINDOW} s)")
    if not 0 <= limit <= MAX_LIMIT:
        raise _refused(rate, f"a limit is from 0 (deny every request) to {MAX_LIMIT}")
    return limit, window


def _refused(rate: Any, why: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(
        f"ratelimits.contrib.django_ratelimit: rate={rate!r}: {why}. It takes "
        f"{_SUPPORTED}; see docs/django-ratelimit.md."
    )
