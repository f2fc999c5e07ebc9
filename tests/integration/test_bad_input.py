"""Bad input, end to end through Django, DRF and the throttle against the real Redis.

Whatever a client sends (any header value, any path, and whatever primary key the project's
users have) the throttle decides (200 or 429, never a 500), the same input is the same
client, and every key written to Redis is at most ``keys.MAX_KEY_LENGTH`` long and holds
no raw secret. And whatever an operator types into the changelist's list edit, the answer
is a form error, never a 500, and nothing is saved.

The identity functions have their own property tests in ``test_identity.py``; these go
through the whole stack, so a header, path or user that broke the middleware, the
throttle, the key or the script would show here.
"""

from __future__ import annotations

import ipaddress
import re
import uuid
from typing import Any
from urllib.parse import quote

import pytest
import redis
from django.contrib.admin.models import LogEntry
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.http import HttpResponse
from django.test import Client
from django.urls import re_path
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ratelimits.conf import app_settings
from ratelimits.engine import denials
from ratelimits.engine.keys import names as keys
from ratelimits.engine.table.current import get_table
from ratelimits.models import Policy
from tests.helpers import make_policy

pytestmark = pytest.mark.django_db

MB = 1_000_000
HEX32 = r"[0-9a-f]{32}"
#: The identities these tests may leave in Redis: hashed header values, hashed or short
#: readable user pks, and the test client's address (``REMOTE_ADDR`` 127.0.0.1).
IDENTITY = re.compile(rf"h:{HEX32}|u#{HEX32}|u:[A-Za-z0-9_-]{{1,40}}|ip:127\.0\.0\.1")
#: Shorter values can occur in a key's fixed parts by chance ("rl", "apikey", hex digits).
DISTINCTIVE = 8

# --- a catch-all view, so that every path reaches the throttle ----------------------------

_as_user: list[Any] = []  # the pk the next request is authenticated as, if any


class PkUser:
    """A signed-in user of a project whose user model has any kind of primary key."""

    is_authenticated = True
    is_active = True

    def __init__(self, pk: Any) -> None:
        self.pk = pk


class AsUser(BaseAuthentication):
    """Authenticates the request as ``PkUser(_as_user[0])`` when a test set one."""

    def authenticate(self, request: Request) -> tuple[PkUser, None] | None:
        return (PkUser(_as_user[0]), None) if _as_user else None


class Anything(APIView):
    authentication_classes = [AsUser]

    def get(self, request: Request, **kwargs: Any) -> Response:
        """200 for any path."""
        return Response({"ok": True})


urlpatterns = [re_path(r"", Anything.as_view(), name="anything")]


@pytest.fixture
def policies(settings: Any) -> None:
    """Four policies on every path: by header (1 per hour), by user (1 per hour), by IP
    and for everyone's path glob (both too high to be reached here)."""
    settings.ROOT_URLCONF = __name__
    common = {"endpoint": "/*", "window": 3600}
    Policy.objects.create(
        name="apikey", key="header:X-Api-Key", algorithm="sliding_counter", limit=1, **common
    )
    Policy.objects.create(name="per-user", key="user", algorithm="sliding_log", limit=1, **common)
    Policy.objects.create(
        name="per-ip", key="ip", algorithm="sliding_counter", limit=1_000_000, **common
    )
    Policy.objects.create(
        name="everything", key="user_or_ip", algorithm="sliding_log", limit=1_000_000, **common
    )
    _as_user.clear()


def get(client: Client, path: str = "/anything/", **meta: Any) -> HttpResponse:
    """GET ``path``, which must be decided by the throttle, with Redis: 200 or 429."""
    response = client.get(path, **meta)
    assert response.status_code in (200, 429), response.status_code
    if response.status_code == 200:
        assert '"everything";q=1000000;w=3600' in response["RateLimit-Policy"]  # by Redis
    else:  # a denial: by Redis, or by the worker from Redis's earlier answer (not failed)
        assert response["RateLimit-Policy"]
    return response


def empty(redis_client: redis.Redis) -> None:
    """Start an example with no counts: an empty Redis, and no denials this process
    remembers from the last example (Redis losing its data is not announced)."""
    redis_client.flushdb()
    denials.clear()


def remaining(response: HttpResponse, policy: str) -> int:
    """The ``r`` of ``policy`` in the response's ``RateLimit`` header."""
    found = re.search(rf'"{policy}";r=(\d+);', response["RateLimit"])
    assert found is not None, response["RateLimit"]
    return int(found[1])


def stored_keys(redis_client: redis.Redis) -> list[bytes]:
    """Every limiter key in Redis (found with SCAN), checked for length and identity."""
    found = [
        key
        for key in redis_client.scan_iter(count=1000)
        if key != keys.version_key(app_settings.KEY_PREFIX).encode()
        and not key.startswith(f"{app_settings.KEY_PREFIX}:stats:".encode())
    ]
    for key in found:
        assert len(key) <= keys.MAX_KEY_LENGTH, len(key)
        parsed = keys.parse_key(key, app_settings.KEY_PREFIX)
        assert parsed is not None, key[:200]
        assert IDENTITY.fullmatch(parsed.identity), parsed.identity
    return found


def assert_not_stored(secret: str, found: list[bytes]) -> None:
    """``secret`` (when long enough to tell) is in none of the keys ``found``."""
    raw = secret.encode("utf-8", "surrogatepass")
    if len(raw) >= DISTINCTIVE:
        assert not any(raw in key for key in found)


EXAMPLES = settings(
    max_examples=60,
    deadline=None,
    # The function-scoped fixtures (client, policies) serve every example alike; Redis is
    # flushed at the start of each example.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
any_text = st.text(st.characters(exclude_categories=()))  # surrogates and controls included


# --- any header value ----------------------------------------------------------------------


@EXAMPLES
@given(value=any_text)
@example(value="k" * MB)
@example(value="🔑" * (4 * MB // 4))  # 4 MB of UTF-8
@example(value="")
@example(value="\x00\r\n\t\x1b[31m}{")
@example(value="\ud800 lone surrogate")
@example(value="sk-live-" + "a" * 32)
def test_any_header_value_is_decided_and_never_stored(
    client: Client, policies: None, redis_client: redis.Redis, value: str
) -> None:
    empty(redis_client)
    first = get(client, HTTP_X_API_KEY=value)
    again = get(client, HTTP_X_API_KEY=value)
    other = get(client, HTTP_X_API_KEY=value + "x")
    # The same value is the same client (1 per hour: denied), another value another client.
    assert (first.status_code, again.status_code, other.status_code) == (200, 429, 200)
    assert remaining(again, "apikey") == 0
    found = stored_keys(redis_client)
    header_keys = [key for key in found if key.endswith(b":apikey:counter")]
    assert len(header_keys) == 2  # value's and value + "x"'s ("" falls back to the IP)
    assert_not_stored(value, found)


@EXAMPLES
@given(forwarded=any_text)
@example(forwarded="6.6.6.6, 203.0.113.9")
@example(forwarded="fe80::1%}{" + "x" * 500)
@example(forwarded="::ffff:1.2.3.4")
@example(forwarded=", , ,")
@example(forwarded="1.2.3.4, " * (MB // 9))
def test_any_forwarded_for_behind_a_proxy_is_decided_and_bounded(
    client: Client, policies: None, redis_client: redis.Redis, settings: Any, forwarded: str
) -> None:
    """Behind one trusted proxy the last ``X-Forwarded-For`` entry is the client: whatever
    it holds, the identity is a parsed address (or the proxy's address), never free text."""
    settings.RATELIMITS = {**settings.RATELIMITS, "NUM_PROXIES": 1}
    empty(redis_client)
    response = client.get("/anything/", HTTP_X_FORWARDED_FOR=forwarded)
    assert response.status_code == 200
    assert remaining(response, "per-ip") == 1_000_000 - 1
    found = [key for key in redis_client.scan_iter(match="rl:{*}:per-ip:*")]
    assert len(found) == 1
    assert len(found[0]) <= keys.MAX_KEY_LENGTH
    parsed = keys.parse_key(found[0], app_settings.KEY_PREFIX)
    assert parsed is not None
    # An address or a /64, as the limiter writes them: the proxy's peer, or a network
    # holding the last entry of the header.
    network = ipaddress.ip_network(parsed.identity.removeprefix("ip:"))
    if network != ipaddress.ip_network("127.0.0.1"):
        last = ipaddress.ip_address([e.strip() for e in forwarded.split(",") if e.strip()][-1])
        mapped = getattr(last, "ipv4_mapped", None)
        assert (mapped or last) in network


# --- any path ------------------------------------------------------------------------------

percent_encoded = st.lists(st.integers(0, 255), max_size=40).map(
    lambda octets: "/" + "".join(f"%{o:02X}" for o in octets)
)
#: A path travels as bytes, so it cannot hold a lone surrogate as text (the test client
#: could not encode it); its UTF-8-ish bytes come percent-encoded in the second form.
wire_text = st.text(st.characters(exclude_categories=["Cs"]))
paths = (
    wire_text.map(lambda text: "/" + text)
    | any_text.map(lambda text: "/" + quote(text.encode("utf-8", "surrogatepass"), safe="/"))
    | percent_encoded
)


@EXAMPLES
@given(path=paths)
@example(path="/" + "a" * MB)
@example(path="/%ff%fe%00%2F..%2F..%2Fetc%2Fpasswd")
@example(path="/" + "é/" * 100_000)
@example(path="//evil.example/x")
@example(path="/?q=" + "%" * 1000)
def test_any_path_is_decided(
    client: Client, policies: None, redis_client: redis.Redis, path: str
) -> None:
    empty(redis_client)
    response = get(client, path)
    assert response.status_code == 200
    assert remaining(response, "everything") == 1_000_000 - 1
    # Paths are not identities: the only keys are the client's address's.
    found = stored_keys(redis_client)
    assert sorted(found) == [
        b"rl:{ip:127.0.0.1}:apikey:counter",
        b"rl:{ip:127.0.0.1}:everything:log",
        b"rl:{ip:127.0.0.1}:per-ip:counter",
    ]


# --- any user primary key ------------------------------------------------------------------

pks = (
    st.integers()
    | st.integers(min_value=10**18, max_value=10**400)
    | st.emails()
    | any_text.filter(bool)
    | st.uuids()
)


def another(pk: Any) -> Any:
    """A different pk of the same type."""
    if isinstance(pk, int):
        return pk + 1
    if isinstance(pk, uuid.UUID):
        return uuid.UUID(int=(pk.int + 1) % 2**128)
    return pk + "x"


@EXAMPLES
@given(pk=pks)
@example(pk=10**400)
@example(pk="alice@example.com")
@example(pk="x" * 4 * MB)
@example(pk="{}}")
@example(pk="\ud800")
def test_any_user_pk_is_decided_and_personal_data_never_stored(
    client: Client, policies: None, redis_client: redis.Redis, pk: Any
) -> None:
    empty(redis_client)

    def as_user(who: Any) -> HttpResponse:
        _as_user[:] = [who]
        try:  # a new API key each time, so that only the user policy can deny
            return get(client, HTTP_X_API_KEY=uuid.uuid4().hex)
        finally:
            _as_user.clear()

    first, again, other = as_user(pk), as_user(pk), as_user(another(pk))
    assert (first.status_code, again.status_code, other.status_code) == (200, 429, 200)
    assert remaining(again, "per-user") == 0
    found = stored_keys(redis_client)
    assert len([key for key in found if key.endswith(b":per-user:log")]) == 2
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", str(pk)):
        assert_not_stored(str(pk), found)  # e-mails and other personal data are hashed


# --- the changelist's list edit ------------------------------------------------------------

CHANGELIST = "/admin/ratelimits/policy/"


def list_edit(policy: Policy, **fields: str) -> dict[str, str]:
    """The changelist's POST for one row: ``policy``'s values with ``fields`` changed."""
    row = {"limit": str(policy.limit), "window": str(policy.window), "mode": policy.mode}
    row |= fields
    data = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": str(policy.pk),
        "_save": "Save",
        **{f"form-0-{name}": value for name, value in row.items()},
    }
    if policy.enabled:
        data["form-0-enabled"] = "on"
    return data


def snapshot(policy: Policy) -> tuple[Any, ...]:
    """The stored values a list edit could change."""
    policy.refresh_from_db()
    return (policy.limit, policy.window, policy.mode, policy.enabled, policy.updated_at)


@pytest.fixture
def login(db: None) -> Policy:
    """A policy to edit."""
    return make_policy("login")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("limit", "-1", "greater than or equal to"),
        ("limit", "abc", "Enter a whole number."),
        ("limit", "", "This field is required."),
        ("limit", "1.5", "Enter a whole number."),
        ("limit", "9223372036854775808", "less than or equal to"),
        ("limit", "9" * 400, "less than or equal to"),
        ("window", "0", "greater than or equal to 1"),
        ("window", "-60", "greater than or equal to"),
        ("window", "2592001", "less than or equal to 2592000"),
        ("window", "sixty", "Enter a whole number."),
        ("window", "9" * 400, "less than or equal to"),
        ("mode", "audit", "Select a valid choice."),
        ("mode", "", "This field is required."),
        ("mode", "ENFORCE", "Select a valid choice."),
    ],
)
def test_a_bad_list_edit_is_a_form_error_and_saves_nothing(
    admin_client: Client,
    login: Policy,
    redis_client: redis.Redis,
    field: str,
    value: str,
    message: str,
) -> None:
    """(``limit`` 0 is in test_admin_ops.py.)"""
    before = snapshot(login)
    get_table()  # the first load writes a stamp (RateLimitMiddleware loads it for the admin)
    stamp = redis_client.get(keys.version_key(app_settings.KEY_PREFIX))
    response = admin_client.post(CHANGELIST, list_edit(login, **{field: value}))
    assert response.status_code == 200
    (row_errors,) = response.context["cl"].formset.errors
    assert list(row_errors) == [field]
    assert message in " ".join(row_errors[field])
    assert snapshot(login) == before
    assert not LogEntry.objects.exists()
    # No change was announced to the workers either.
    assert redis_client.get(keys.version_key(app_settings.KEY_PREFIX)) == stamp


def test_one_bad_row_saves_none_of_the_rows(admin_client: Client, login: Policy) -> None:
    search = Policy.objects.create(
        name="search", endpoint="search", algorithm="sliding_counter", limit=20, window=60
    )
    rows = {0: list_edit(login, limit="9"), 1: list_edit(search, window="0")}
    data = {"form-TOTAL_FORMS": "2", "form-INITIAL_FORMS": "2", "_save": "Save"}
    for index, row in rows.items():
        data |= {k.replace("form-0-", f"form-{index}-"): v for k, v in row.items() if "-0-" in k}
    before = snapshot(login), snapshot(search)
    response = admin_client.post(CHANGELIST, data)
    assert response.status_code == 200
    assert (snapshot(login), snapshot(search)) == before


@pytest.mark.parametrize(
    "tampered",
    [
        {"form-TOTAL_FORMS": None, "form-INITIAL_FORMS": None},  # no management form
        {"form-TOTAL_FORMS": "abc"},
        {"form-0-id": "999999"},  # a row that does not exist
        {"form-0-id": "not a pk"},
        {"form-0-id": None},
    ],
    ids=[
        "no-management-form",
        "total-not-a-number",
        "unknown-id",
        "bad-id",
        "no-id",
    ],
)
def test_a_tampered_list_edit_is_refused_without_a_500(
    admin_client: Client, login: Policy, tampered: dict[str, str | None]
) -> None:
    data: dict[str, str] = list_edit(login, limit="9")
    for name, value in tampered.items():
        if value is None:
            data.pop(name)
        else:
            data[name] = value
    before = snapshot(login)
    response = admin_client.post(CHANGELIST, data)
    assert response.status_code in (200, 302, 400)
    assert snapshot(login) == before
    assert not LogEntry.objects.exists()


def test_the_highest_limit_the_list_edit_accepts_is_counted_exactly(
    admin_client: Client, login: Policy, client: Client, django_capture_on_commit_callbacks: Any
) -> None:
    """Whatever maximum validation enforces, a limit at it works end to end: the script
    counts in doubles and replies in Redis integers, so a limit beyond 2**53 would come
    back rounded, and at 2**63 - 1 as a negative remaining (r=-9223372036854775808)."""
    highest = min(
        v.limit_value
        for v in Policy._meta.get_field("limit").validators
        if isinstance(v, MaxValueValidator)  # the model's own, and the database's range
    )
    with django_capture_on_commit_callbacks(execute=True):  # announce it, as a commit would
        response = admin_client.post(CHANGELIST, list_edit(login, limit=str(highest)))
    assert response.status_code == 302
    login.refresh_from_db()
    assert login.limit == highest
    answers = [client.post("/api/login/") for _ in range(2)]
    assert [a.status_code for a in answers] == [400, 400]  # admitted (no password: 400)
    assert answers[0]["RateLimit-Policy"] == f'"login";q={highest};w=60'
    assert answers[0]["RateLimit"] == f'"login";r={highest - 1};t=60'
    assert answers[1]["RateLimit"].startswith(f'"login";r={highest - 2};')
    # One more than the highest is refused on the field, and nothing is saved.
    response = admin_client.post(CHANGELIST, list_edit(login, limit=str(highest + 1)))
    assert response.status_code == 200
    (row_errors,) = response.context["cl"].formset.errors
    assert list(row_errors) == ["limit"]
    login.refresh_from_db()
    assert login.limit == highest


# --- the model's validation: what test_policy_validation.py does not cover ------------------


@pytest.mark.parametrize(
    ("overrides", "field", "code"),
    [
        ({"algorithm": "leaky_bucket"}, "algorithm", "invalid_choice"),
        ({"mode": "audit"}, "mode", "invalid_choice"),
        ({"limit": "abc"}, "limit", "invalid"),
        ({"limit": 2**63}, "limit", "max_value"),
        ({"window": 10**30}, "window", "max_value"),
        ({"name": "n" * 65}, "name", "max_length"),
        ({"endpoint": "/" + "a" * 1000}, "endpoint", "max_length"),
    ],
    ids=lambda v: repr(v)[:40] if isinstance(v, dict) else None,
)
def test_full_clean_refuses_on_the_field(overrides: dict[str, Any], field: str, code: str) -> None:
    fields: dict[str, Any] = {"name": "search", "endpoint": "api:search", "limit": 5, "window": 60}
    policy = Policy(**(fields | overrides))
    with pytest.raises(ValidationError) as raised:
        policy.full_clean()
    errors = raised.value.error_dict
    assert set(errors) == {field}
    assert code in [error.code for error in errors[field]]
