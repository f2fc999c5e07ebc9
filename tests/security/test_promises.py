"""The security promises, each stated once, end to end against the real Redis.

1. A client cannot choose its IP identity: ``X-Forwarded-For`` is trusted only as far as
   ``NUM_PROXIES``, ``X-Real-IP`` and the other client-IP headers never, and an IPv6
   client rotating addresses inside its /64 stays one client.
2. API keys (header identities) are secrets: never written to Redis, in a key or a value,
   raw or as an unkeyed hash, never logged, never shown in the admin.
3. Resetting counters from the admin needs the ``ratelimits.reset_counters`` permission
   and a CSRF token; without either, the keys are untouched.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.test import Client, override_settings

from ratelimits.engine.reporting import stats
from ratelimits.models import Policy
from tests.helpers import make_policy, ratelimits_settings

pytestmark = pytest.mark.django_db

LOGIN = "/api/login/"
CHANGELIST = "/admin/ratelimits/policy/"


def login_policy(limit: int = 3, **fields: Any) -> Policy:
    """``limit`` POSTs to /api/login/ per minute per IP."""
    return make_policy("login", methods="POST", limit=limit, **fields)


def limiter_keys(redis_client: redis.Redis, policy: str = "*") -> list[str]:
    """The limiter's keys in Redis (by SCAN), sorted."""
    return sorted(k.decode() for k in redis_client.scan_iter(match=f"rl:{{*}}:{policy}:*"))


# --- 1. Who is counted: forged client-IP headers ---------------------------------------------

FORGED: list[dict[str, str]] = [
    {},
    {"HTTP_X_FORWARDED_FOR": "6.6.6.6"},
    {"HTTP_X_FORWARDED_FOR": "10.0.0.1, 6.6.6.7"},
    {"HTTP_X_REAL_IP": "6.6.6.8"},
    {"HTTP_X_REAL_IP": "6.6.6.9", "HTTP_X_FORWARDED_FOR": "6.6.6.10"},
    {"HTTP_FORWARDED": "for=6.6.6.11"},
    {"HTTP_TRUE_CLIENT_IP": "6.6.6.12", "HTTP_CF_CONNECTING_IP": "6.6.6.13"},
    {"HTTP_X_CLIENT_IP": "6.6.6.14", "HTTP_CLIENT_IP": "6.6.6.15"},
    {"HTTP_X_FORWARDED_FOR": "garbage, ::1, 127.0.0.1"},
]


@override_settings(RATELIMITS=ratelimits_settings(NUM_PROXIES=0))
def test_without_proxies_forged_headers_share_the_real_address_counter(
    client: Client, redis_client: redis.Redis
) -> None:
    limit = 3
    login_policy(limit)
    statuses = [
        client.post(LOGIN, REMOTE_ADDR="198.51.100.4", **FORGED[i % len(FORGED)]).status_code
        for i in range(2 * len(FORGED))
    ]
    assert statuses == [400] * limit + [429] * (len(statuses) - limit)  # 400: no password
    assert limiter_keys(redis_client) == ["rl:{ip:198.51.100.4}:login:log"]
    assert client.post(LOGIN, REMOTE_ADDR="198.51.100.5").status_code == 400  # another client


@override_settings(RATELIMITS=ratelimits_settings(NUM_PROXIES=1))
def test_behind_one_proxy_the_address_it_appended_is_the_identity(
    client: Client, redis_client: redis.Redis
) -> None:
    """The proxy (``REMOTE_ADDR`` 10.0.0.1) appends the address it saw, 203.0.113.1, to
    whatever ``X-Forwarded-For`` the client sent; only that last entry counts."""
    limit = 3
    login_policy(limit)

    def through_proxy(client_sent: dict[str, str], seen: str = "203.0.113.1") -> int:
        meta = dict(client_sent)
        forwarded = meta.pop("HTTP_X_FORWARDED_FOR", "")
        meta["HTTP_X_FORWARDED_FOR"] = f"{forwarded}, {seen}" if forwarded else seen
        return client.post(LOGIN, REMOTE_ADDR="10.0.0.1", **meta).status_code

    statuses = [through_proxy(FORGED[i % len(FORGED)]) for i in range(2 * len(FORGED))]
    assert statuses == [400] * limit + [429] * (len(statuses) - limit)
    assert limiter_keys(redis_client) == ["rl:{ip:203.0.113.1}:login:log"]
    # Not the proxy's address: another client behind the same proxy has its own counter.
    assert through_proxy({}, seen="203.0.113.2") == 400


def test_an_ipv6_client_rotating_inside_its_64_is_one_client(
    client: Client, redis_client: redis.Redis
) -> None:
    limit = 3
    login_policy(limit)
    statuses = [
        client.post(LOGIN, REMOTE_ADDR=f"2001:db8:1:2:{i:x}::{i + 1:x}").status_code
        for i in range(2 * limit)
    ]
    assert statuses == [400] * limit + [429] * limit
    assert limiter_keys(redis_client) == ["rl:{ip:2001:db8:1:2::/64}:login:log"]
    assert client.post(LOGIN, REMOTE_ADDR="2001:db8:1:3::1").status_code == 400


# --- 2. API keys are secrets -----------------------------------------------------------------

SECRET = "sk-live-7Hq2mZ9xVb4K"


def everything_in_redis(redis_client: redis.Redis) -> Iterator[bytes]:
    """Every key, and every value, member and field of every key (by type)."""
    for key in redis_client.scan_iter(count=1000):
        yield key
        kind = redis_client.type(key)
        if kind == b"string":
            yield redis_client.get(key) or b""
        elif kind == b"hash":
            for field, value in redis_client.hgetall(key).items():
                yield field
                yield value
        elif kind == b"zset":
            yield from redis_client.zrange(key, 0, -1)
        elif kind == b"set":
            yield from redis_client.smembers(key)
        elif kind == b"list":
            yield from redis_client.lrange(key, 0, -1)
        else:
            raise AssertionError(f"unexpected {kind!r} at {key!r}")


def secret_forms(secret: str) -> list[bytes]:
    """The secret as it could leak: raw, lowercased, and unkeyed hashes (which a low-entropy
    key could be found back from) in full and cut like the limiter's 32 hex digits."""
    raw = secret.encode()
    forms = [raw, raw.lower()]
    for name in ("md5", "sha1", "sha256"):
        for data in (raw, b"http_x_api_key\x00" + raw):
            digest = hashlib.new(name, data).hexdigest().encode()
            forms += [digest, digest[:32]]
    return forms


def test_a_header_identity_never_reaches_redis_the_logs_or_the_admin(
    client: Client,
    admin_client: Client,
    redis_client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for algorithm in ("sliding_log", "sliding_counter", "fixed_window"):
        Policy.objects.create(
            name=f"api-{algorithm.replace('_', '-')}",
            endpoint="search",
            algorithm=algorithm,
            limit=3,
            window=3600,
            key="header:X-Api-Key",
        )
    shadow = Policy.objects.create(
        name="api-shadow",
        endpoint="search",
        algorithm="sliding_log",
        limit=1,
        window=3600,
        key="header:X-Api-Key",
        mode="shadow",
    )
    with caplog.at_level(logging.DEBUG):
        responses = [client.get("/api/search/", HTTP_X_API_KEY=SECRET) for _ in range(5)]
        assert [r.status_code for r in responses] == [200] * 3 + [429] * 2
        assert stats.flush()  # the dashboard's counts, too
        page = admin_client.get(f"{CHANGELIST}{shadow.pk}/change/")
    assert page.status_code == 200
    assert "</code> (hashed)</td>" in page.content.decode()  # the client is listed, hashed

    stored = list(everything_in_redis(redis_client))
    assert len(limiter_keys(redis_client)) == 4  # the four policies did count
    leaks = [form for form in secret_forms(SECRET) for item in stored if form in item]
    assert leaks == []
    assert not any(SECRET in m for m in caplog.messages)
    assert any("shadow policy api-shadow would deny" in m for m in caplog.messages)
    assert SECRET not in page.content.decode()
    for response in responses:
        assert not any(SECRET in value for _, value in response.items())


# --- 3. Resetting counters: permission and CSRF ----------------------------------------------


@pytest.fixture
def counted(redis_client: redis.Redis) -> Iterator[Policy]:
    """The login policy, with two clients' counts in Redis."""
    policy = login_policy(limit=10)
    client = Client()
    for address in ("203.0.113.7", "203.0.113.7", "198.51.100.1"):
        client.post(LOGIN, REMOTE_ADDR=address)
    before = limiter_keys(redis_client)
    assert before == ["rl:{ip:198.51.100.1}:login:log", "rl:{ip:203.0.113.7}:login:log"]
    yield policy


def person(*codenames: str, staff: bool = True, name: str = "someone") -> Client:
    """A CSRF-enforcing browser, signed in as a user with the given ratelimits perms."""
    user = User.objects.create_user(name, password="pw", is_staff=staff)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="ratelimits", codename__in=codenames)
    )
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    return browser


def csrf_token(browser: Client) -> str:
    """A valid token for ``browser``'s session, as the admin's pages put it in forms."""
    browser.get("/admin/", follow=True)  # the index or the login page: both have a form
    return browser.cookies[settings.CSRF_COOKIE_NAME].value


@pytest.mark.parametrize("scope", ["policy", "one client"])
@pytest.mark.parametrize(
    "who",
    ["anonymous", "not staff, with the permission", "staff, view and change only"],
)
def test_reset_needs_the_reset_permission(
    counted: Policy, redis_client: redis.Redis, who: str, scope: str
) -> None:
    if who == "anonymous":
        browser = Client(enforce_csrf_checks=True)
    elif who.startswith("not staff"):
        browser = person("reset_counters", staff=False)
    else:
        browser = person("view_policy", "change_policy")
    before = limiter_keys(redis_client)
    data = {"csrfmiddlewaretoken": csrf_token(browser)}
    if scope == "one client":
        data["identity"] = "203.0.113.7"
    response = browser.post(f"{CHANGELIST}{counted.pk}/reset-counters/", data)
    if who == "staff, view and change only":
        assert response.status_code == 403
    else:  # the admin sends whoever is not staff to its login page
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")
    assert limiter_keys(redis_client) == before
    # Nor through the changelist's action.
    browser.post(
        CHANGELIST,
        {"action": "reset_counters", "_selected_action": [counted.pk], **data},
    )
    assert limiter_keys(redis_client) == before


@pytest.mark.parametrize("token", ["none", "wrong", "another session's"])
def test_reset_needs_a_csrf_token(counted: Policy, redis_client: redis.Redis, token: str) -> None:
    browser = person("view_policy", "reset_counters")
    data: dict[str, str] = {}
    if token == "wrong":
        csrf_token(browser)
        data["csrfmiddlewaretoken"] = "x" * 32
    elif token == "another session's":
        csrf_token(browser)
        data["csrfmiddlewaretoken"] = csrf_token(person("view_policy", name="other"))
    before = limiter_keys(redis_client)
    url = f"{CHANGELIST}{counted.pk}/reset-counters/"
    assert browser.post(url, data).status_code == 403
    assert browser.post(url, {**data, "identity": "203.0.113.7"}).status_code == 403
    action = {"action": "reset_counters", "_selected_action": [counted.pk], **data}
    assert browser.post(CHANGELIST, action).status_code == 403
    assert limiter_keys(redis_client) == before


def test_with_the_permission_and_the_token_the_reset_deletes_the_keys(
    counted: Policy, redis_client: redis.Redis
) -> None:
    """The control for the refusals above: the same POSTs, allowed, do delete."""
    browser = person("view_policy", "reset_counters")
    token = csrf_token(browser)
    url = f"{CHANGELIST}{counted.pk}/reset-counters/"
    response = browser.post(url, {"csrfmiddlewaretoken": token, "identity": "203.0.113.7"})
    assert response.status_code == 302
    assert limiter_keys(redis_client) == ["rl:{ip:198.51.100.1}:login:log"]
    response = browser.post(url, {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert limiter_keys(redis_client) == []
