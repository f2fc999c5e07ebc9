"""What django-ratelimit would not read either is refused when the view is decorated, with
a message naming what is supported."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from ratelimits.contrib.django_ratelimit import ratelimit


def mykey(group: str, request: Any) -> str:
    return str(request.META["REMOTE_ADDR"][::-1])


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("header:bad name", "not a valid HTTP field name"),
        ("cookie:x", "does not know this key"),
        (3, "a key is a string or a callable"),
    ],
)
def test_keys_django_ratelimit_does_not_read(key: Any, why: str) -> None:
    with pytest.raises(ImproperlyConfigured) as refused:
        ratelimit(key=key, rate="1/m")
    assert why in str(refused.value)
    assert "'ip', 'user', 'user_or_ip', 'header:<name>', 'get:<name>'" in str(refused.value)


@pytest.mark.parametrize(
    ("rate", "why"),
    [
        ("5/M", "not a rate django-ratelimit reads"),
        ("5/minute", "not a rate django-ratelimit reads"),
        ("5/0m", "0 seconds"),
        ("5/31d", "at most 30 days"),
        ("3000000000/d", "a limit is from 0"),
    ],
)
def test_rates_a_policy_cannot_hold(rate: Any, why: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="rate=") as refused:
        ratelimit(key="ip", rate=rate)
    assert why in str(refused.value)


def test_unknown_methods() -> None:
    with pytest.raises(ImproperlyConfigured, match="Unknown HTTP method"):
        ratelimit(key="ip", rate="1/m", method="FETCH")


def test_a_none_rate_limits_nothing_whatever_the_key() -> None:
    ratelimit(key=mykey, rate=None)  # as django-ratelimit: no rate, no key read
