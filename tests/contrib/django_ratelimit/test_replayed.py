"""django-ratelimit's own test scenarios (``django_ratelimit/tests.py`` of 4.1.0 and the
async ``tests/test_async.py`` of its main branch) replayed against
``ratelimits.contrib.django_ratelimit``, on real Redis, each on a sync and an async view.

Replayed: rate parsing; no key; ip; block (ratelimits' 429, or ``Ratelimited`` and
``RATELIMIT_EXCEPTION_CLASS`` as a class or a dotted path when blocking raises); method;
UNSAFE methods; header keys; rate; none rate; user_or_ip; stacked decorators; stacked
methods; sorted methods; the IPv4 /32 and IPv6 /128 and /64 masks; the class-based views
(method_decorator on a method and on the class, a wrapped ``as_view()``, methods and
views counted apart, in test_class_views.py); the cache connection errors, failing
closed and with ``RATELIMIT_FAIL_OPEN`` (Redis stopped).

Changed: ``0/m`` (test_zero_rate, test_unsafe_methods) denies every request, which no
policy does (a policy admits at least 1): it is refused, and the UNSAFE scenario runs
at 1/m. test_stacked_decorator stacks two callable keys; it runs with ``ip`` keys. A key
django-ratelimit refuses per request (no key) is refused when the view is decorated.

Left out, because ratelimits cannot express them as a policy and refuses them when the
view is decorated (tests in test_refusals.py): callable rates (test_callable_rate,
_none, _zero, _import), ``get:``/``post:`` keys, callable keys and their dotted paths.
Left out as not applicable: the IPv4 /16 mask (ratelimits counts an IPv4 client per
address), ``RATELIMIT_IP_META_KEY`` (IpMetaTests: ratelimits reads the address behind
``TRUSTED_PROXIES``), ``RATELIMIT_USE_CACHE`` and a cache that expires at once (the
counters live in ratelimits' Redis), and ``is_ratelimited`` / ``get_usage``
(FunctionsTests), which this module does not provide.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from ratelimits.contrib.django_ratelimit import Ratelimited, ratelimit
from ratelimits.contrib.django_ratelimit.rates import parse_rate
from ratelimits.models import Policy
from ratelimits.testutils import RedisServer
from tests.contrib.django_ratelimit.views import limited_view, request, user_request

pytestmark = pytest.mark.django_db

KINDS = ["sync", "async"]
RAISE = override_settings(RATELIMITS={"DJANGO_RATELIMIT_BLOCK": "raise"})


class CustomRatelimitedException(Exception):
    pass


def test_rate_parsing() -> None:
    for given, parsed in [
        ("100/s", (100, 1)),
        ("100/10s", (100, 10)),
        ("100/10", (100, 10)),
        ("100/m", (100, 60)),
        ("400/10m", (400, 600)),
        ("1000/h", (1000, 3600)),
        ("800/d", (800, 24 * 60 * 60)),
        ((5, 30), (5, 30)),
    ]:
        assert parse_rate(given) == parsed


@pytest.mark.parametrize("kind", KINDS)
def test_no_key_is_refused_when_the_view_is_called(kind: str) -> None:
    view = limited_view(kind, {"rate": "1/m"})  # django-ratelimit refuses it then too
    with pytest.raises(ImproperlyConfigured, match="a key is needed"):
        view(request())


@pytest.mark.parametrize("kind", KINDS)
def test_ip(kind: str) -> None:
    view = limited_view(kind, {"key": "ip", "rate": "1/m", "block": False})
    assert not view(request()), "First request works."
    assert view(request()), "Second request is limited"


@pytest.mark.parametrize("kind", KINDS)
def test_block_answers_429(kind: str) -> None:
    view = limited_view(kind, {"key": "ip", "rate": "1/m"})
    assert view(request()) is False
    response = view(request())
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60


@pytest.mark.parametrize("kind", KINDS)
@RAISE
def test_block_raises(kind: str) -> None:
    view = limited_view(kind, {"key": "ip", "rate": "1/m"})
    assert not view(request()), "First request works."
    with pytest.raises(Ratelimited):
        view(request())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "exception",
    [CustomRatelimitedException, f"{__name__}.CustomRatelimitedException"],
    ids=["class", "dotted path"],
)
@RAISE
def test_custom_exception_class(kind: str, exception: Any) -> None:
    view = limited_view(kind, {"key": "ip", "rate": "1/m"})
    with override_settings(RATELIMIT_EXCEPTION_CLASS=exception):
        assert not view(request())
        with pytest.raises(CustomRatelimitedException):
            view(request())


@pytest.mark.parametrize("kind", KINDS)
def test_method(kind: str) -> None:
    view = limited_view(
        kind, {"key": "ip", "method": "POST", "rate": "1/m", "group": "a", "block": False}
    )
    assert not view(request("post")), "Do not limit first POST."
    assert view(request("post")), "Limit second POST."
    assert not view(request("get")), "Do not limit GET."


@pytest.mark.parametrize("kind", KINDS)
def test_unsafe_methods(kind: str) -> None:
    view = limited_view(
        kind, {"key": "ip", "method": ratelimit.UNSAFE, "rate": "1/m", "block": False}
    )
    for method in ("get", "head", "options", "get", "head", "options"):
        assert not view(request(method))
    assert not view(request("delete"))
    for method in ("delete", "post", "put", "patch"):
        assert view(request(method))


@pytest.mark.parametrize("kind", KINDS)
def test_key_header(kind: str) -> None:
    view = limited_view(
        kind,
        {"key": "header:x-real-ip", "rate": "1/m", "block": False},
        {"key": "header:x-missing-header", "rate": "1/m", "block": False},
    )
    assert not view(request("post", HTTP_X_REAL_IP="1.2.3.4"))
    assert view(request("post", HTTP_X_REAL_IP="1.2.3.4"))


@pytest.mark.parametrize("kind", KINDS)
def test_rate(kind: str) -> None:
    view = limited_view(kind, {"key": "ip", "rate": "2/m", "block": False})
    assert not view(request("post")), "First request is not limited."
    assert not view(request("post")), "Second request is not limited."
    assert view(request("post")), "Third request is limited."


@pytest.mark.parametrize("kind", KINDS)
def test_zero_rate_denies_every_request_without_a_policy(kind: str, redis_client: Any) -> None:
    view = limited_view(kind, {"key": "ip", "rate": "0/m", "block": False})
    assert view(request("post")) and view(request("get"))
    assert not Policy.objects.exists() and not redis_client.keys("*")


@pytest.mark.parametrize("kind", KINDS)
def test_none_rate(kind: str) -> None:
    view = limited_view(kind, {"key": "ip", "rate": None, "block": False})
    for _ in range(7):
        assert not view(request("post"))


@pytest.mark.parametrize("kind", KINDS)
def test_user_or_ip(kind: str) -> None:
    view = limited_view(kind, {"key": "user_or_ip", "rate": "1/m", "block": False})
    assert not view(user_request(authenticated=False))
    assert view(user_request(authenticated=False))
    assert not view(user_request(authenticated=True))
    assert view(user_request(authenticated=True))


@pytest.mark.parametrize("kind", KINDS)
def test_stacked_decorator(kind: str) -> None:
    # The shorter one first: the second must not reset request.limited to False.
    view = limited_view(
        kind,
        {"rate": "1/m", "block": False, "key": "ip"},
        {"rate": "10/d", "block": False, "key": "ip"},
    )
    assert not view(request("post"))
    assert view(request("post"))


@pytest.mark.parametrize("kind", KINDS)
def test_stacked_methods(kind: str) -> None:
    view = limited_view(
        kind,
        {"rate": "1/m", "key": "ip", "method": "GET", "block": False},
        {"rate": "1/m", "key": "ip", "method": "POST", "block": False},
    )
    assert not view(request("get"))
    assert not view(request("post"))
    assert view(request("get"))
    assert view(request("post"))


@pytest.mark.parametrize("kind", KINDS)
def test_sorted_methods(kind: str) -> None:
    common = {"rate": "1/m", "key": "ip", "group": "a", "block": False}
    get_post = limited_view(kind, {**common, "method": ["GET", "POST"]})
    post_get = limited_view(kind, {**common, "method": ["POST", "GET"]})
    assert not get_post(request("get"))
    assert post_get(request("get"))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("mask", "first", "same", "other"),
    [
        ({}, "10.1.1.1", "10.1.1.1", "10.1.1.2"),
        ({"RATELIMIT_IPV4_MASK": 32}, "10.1.1.1", "10.1.1.1", "10.1.1.2"),
        ({"RATELIMIT_IPV6_MASK": 128}, "2001:db8::1000", "2001:db8::1000", "2001:db8::1001"),
        ({"RATELIMIT_IPV6_MASK": 64}, "2001:db8::1000", "2001:db8::1001", "2001:db9::1000"),
    ],
    ids=["default", "full v4", "full v6", "v6 /64"],
)
def test_masks(kind: str, mask: dict[str, int], first: str, same: str, other: str) -> None:
    view = limited_view(kind, {"rate": "1/m", "key": "ip", "block": False})
    with override_settings(**mask):
        assert not view(request(address=first))
        assert view(request(address=same))
        assert not view(request(address=other))


@pytest.mark.parametrize("kind", KINDS)
def test_limit_on_cache_connection_error(kind: str, redis_server: RedisServer) -> None:
    view = limited_view(kind, {"key": "ip", "rate": "10/m", "block": False})
    redis_server.stop()  # started again for the next test
    assert view(request("post"))


@pytest.mark.parametrize("kind", KINDS)
@override_settings(RATELIMIT_FAIL_OPEN=True)
def test_fail_open_setting(kind: str, redis_server: RedisServer) -> None:
    view = limited_view(kind, {"key": "ip", "rate": "1/m", "block": False})
    redis_server.stop()
    assert not view(request())
    assert not view(request())
