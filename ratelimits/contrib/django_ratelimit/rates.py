"""django-ratelimit's ``rate`` read as django-ratelimit reads it: ``"5/m"`` is 5 requests a
minute, ``"10/5m"`` 10 every five minutes, ``"100/10"`` 100 every ten seconds, and a tuple
``(count, seconds)`` is taken as it is."""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ratelimits.validators import MAX_LIMIT, MAX_WINDOW

#: django-ratelimit's ``rate_re``: a count, ``/``, an optional multiple, an optional unit.
RATE = re.compile(r"([\d]+)/([\d]*)([smhd])?")
#: django-ratelimit's ``_PERIODS``: the seconds of each unit (none: seconds).
PERIODS = {"s": 1, "m": 60, "h": 60 * 60, "d": 24 * 60 * 60}

_SUPPORTED = (
    "a rate such as '5/m', '100/h', '1000/d' or '10/5m', a tuple (count, seconds), or None "
    "(no limit)"
)


def parse_rate(rate: Any) -> tuple[int, int] | None:
    """``(limit, window)`` of ``rate``; ``None`` for ``None``, which django-ratelimit reads as
    "no limit". Raise ``ImproperlyConfigured`` for a rate known only per request (a
    callable, or the dotted path of one), for text django-ratelimit would misread (it
    reads ``"5/M"`` as 5 a second), and for a rate no policy can hold (``"0/m"``, which
    denies every request, or a window above 30 days)."""
    if rate is None:
        return None
    if callable(rate) or (isinstance(rate, str) and "." in rate):
        raise _refused(rate, "a rate computed per request cannot be a policy's default")
    if isinstance(rate, tuple) and len(rate) == 2 and all(type(n) is int for n in rate):
        limit, window = rate
    elif isinstance(rate, str) and (found := RATE.fullmatch(rate)) is not None:
        count, multiple, unit = found.groups()
        limit, window = int(count), PERIODS[unit or "s"] * int(multiple or 1)
    else:
        raise _refused(rate, "it is not a rate django-ratelimit reads")
    if window < 1:
        raise _refused(rate, "its period is 0 seconds")
    if window > MAX_WINDOW:
        raise _refused(rate, f"a policy's window is at most 30 days ({MAX_WINDOW} s)")
    if limit < 1:
        raise _refused(
            rate,
            "it denies every request; a policy admits at least 1 per window (to refuse a "
            "view, refuse it in the view)",
        )
    if limit > MAX_LIMIT:
        raise _refused(rate, f"a policy's limit is at most {MAX_LIMIT}")
    return limit, window


def _refused(rate: Any, why: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(
        f"ratelimits.contrib.django_ratelimit.ratelimit(rate={rate!r}): {why}. It takes "
        f"{_SUPPORTED}; see docs/django-ratelimit.md."
    )
