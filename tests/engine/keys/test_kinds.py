"""The key-kind registry holds the model, the database, the admin and the docs together;
the session key and pairs of kinds, end to end against the real Redis."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import Client

from ratelimits.admin.changelist import PAIRS, KeyKindFilter
from ratelimits.engine.keys import kinds
from ratelimits.engine.keys.kinds import KEY_KINDS, kind_of, validate_key
from ratelimits.models import Policy
from tests.helpers import create_policy

pytestmark = pytest.mark.django_db

DOCS = Path(__file__).resolve().parents[3] / "docs" / "policies.md"


def spelled(kind: kinds.KeyKind) -> str:
    """A policy's key for ``kind``."""
    return "header:X-Api-Key" if kind.name == "header" else kind.name


def sign_in_counts(key: str) -> str:
    """The counts a policy keyed ``key`` is saved with: only sign-ins have a username."""
    return "sign_in_failures" if kind_of(key).sign_in_only else "all"


@pytest.mark.parametrize("kind", KEY_KINDS.values(), ids=list(KEY_KINDS))
def test_every_kind_is_accepted_by_the_model_and_the_database(kind):
    key = spelled(kind)
    validate_key(key)
    policy = Policy(name="p", endpoint="*", limit=5, window=60, key=key, counts=sign_in_counts(key))
    policy.full_clean()
    policy.save()  # the database's constraint, built from the same registry
    assert Policy.objects.get().key == key


@pytest.mark.parametrize(
    "key",
    ["username+ip", "ip+user_agent", "ip+ip", "global+ip", "ip+global", "header:X+ip+ip", "ip+"],
)
def test_a_bad_pair_is_refused_by_the_form_and_by_the_database(key):
    if key == "header:X+ip+ip":  # one header whose name holds "+": a single key
        validate_key(key)
        return
    if key == "username+ip":
        validate_key(key)
        return
    with pytest.raises(ValidationError):
        validate_key(key)
    with pytest.raises(IntegrityError), transaction.atomic():
        Policy.objects.bulk_create([Policy(name="p", endpoint="*", limit=5, window=60, key=key)])


@pytest.mark.parametrize(
    ("key", "counts", "field_problem"),
    [
        ("username+ip", "all", "Only failed sign-ins have an attempted username"),
        ("ip+username", "failures", "Only failed sign-ins have an attempted username"),
        ("user+ip", "sign_in_failures", "A failed sign-in has no user"),
        ("ip+anon", "sign_in_failures", "an anon policy never counts it"),
    ],
)
def test_the_sign_in_rules_hold_for_pairs_in_the_form_and_the_database(key, counts, field_problem):
    policy = Policy(name="p", endpoint="*", limit=5, window=60, key=key, counts=counts)
    with pytest.raises(ValidationError) as refused:
        policy.full_clean()
    assert field_problem in str(refused.value)
    with pytest.raises(IntegrityError), transaction.atomic():
        Policy.objects.bulk_create([policy])


def test_a_pair_joins_its_kinds_flags():
    pair = kind_of("username+ip")
    assert pair.parts == (KEY_KINDS["username"], KEY_KINDS["ip"])
    assert pair.sign_in_only and pair.hashed and not pair.needs_user
    assert kind_of("ip+header:User-Agent").hashed
    assert kind_of("user+ip").needs_user and kind_of("user+ip").not_for_sign_in
    assert kinds.describe("n:" + "0" * 32 + "+ip:203.0.113.7") == "username+ip"
    assert kinds.is_hashed("n:" + "0" * 32 + "+ip:203.0.113.7")
    assert not kinds.is_hashed("ip:203.0.113.7")


def test_the_admin_filter_offers_every_kind_and_pairs():
    offered = KeyKindFilter(None, {}, Policy, None).lookup_choices
    assert [value for value, _ in offered] == [*KEY_KINDS, PAIRS]


def test_the_admin_filter_finds_pairs_and_headers(admin_client):
    create_policy("pair", "*", key="username+ip", counts="sign_in_failures")
    create_policy("plain", "api:items", key="ip")
    create_policy("keyed", "api:items", key="header:X+Y")  # a header's name may hold "+"
    for value, expected in ((PAIRS, ["pair"]), ("header", ["keyed"]), ("ip", ["plain"])):
        response = admin_client.get("/admin/ratelimits/policy/", {"key_kind": value})
        shown = [p.name for p in response.context["cl"].result_list]
        assert shown == expected, value


def test_the_docs_describe_every_kind_and_pairs():
    text = DOCS.read_text()
    counted = text[text.index("## Who is counted") :]
    for kind in KEY_KINDS.values():
        assert re.search(rf"^- `{re.escape(spelled(kind).split(':')[0])}", counted, re.M), kind
    assert "- A pair, `<kind>+<kind>`" in counted


@pytest.mark.urls("tests.faces.urls")
def test_two_browser_sessions_behind_one_address_count_apart(redis_client):
    create_policy("per-session", "/sync/*", limit=2, key="session")
    first, second, cookieless = Client(), Client(), Client()
    for client in (first, second):
        session = client.session
        session["seen"] = True
        session.save()
        client.cookies["sessionid"] = session.session_key
    statuses = {
        name: [client.get("/sync/").status_code for _ in range(3)]
        for name, client in (("first", first), ("second", second), ("none", cookieless))
    }
    # Each session has its own 2; a request without a session counts by its address.
    assert statuses == {name: [200, 200, 429] for name in ("first", "second", "none")}
    names = [key.decode() for key in redis_client.keys("*:per-session:*")]
    found = {re.search(r"\{(.*)\}", name).group(1) for name in names}
    sessions = {i for i in found if i.startswith("s:")}
    assert len(sessions) == 2 and found - sessions == {"ip:127.0.0.1"}
    secret = first.cookies["sessionid"].value
    assert not any(secret in key.decode() for key in redis_client.keys("*"))
