"""The ``anon`` key where policies are written: the model, the admin's form and filter and
the database constraint accept it and still refuse lookalikes; a sign-in policy may not
use it; its overrides name addresses, never users; ``check`` says why it skips a user.
(The faces that count by it: tests/faces/test_anon_key.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from ratelimits.models import Policy, PolicyOverride
from ratelimits.tools.policy_files import apply_import, plan_import
from tests.admin.test_admin import GOOD as FORM
from tests.helpers import create_policy, make_policy, problems_of, run_json

pytestmark = pytest.mark.django_db

ROW: dict[str, Any] = {"name": "search", "endpoint": "api:search", "limit": 5, "window": 60}
LOOKALIKES = ["anonymous", "Anon", "anon:ip", "anon\n", "ip_or_anon"]
ADD = "/admin/ratelimits/policy/add/"


def test_the_model_and_the_database_accept_anon() -> None:
    policy = Policy(**ROW, key="anon")
    policy.full_clean()
    policy.save()
    assert Policy.objects.get().key == "anon"


@pytest.mark.parametrize("key", LOOKALIKES)
def test_the_model_and_the_database_refuse_lookalikes(key: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Policy(**ROW, key=key).full_clean()
    assert "is not a client key. Use user, ip, user_or_ip, anon, global" in str(refused.value)
    with pytest.raises(IntegrityError), transaction.atomic():
        Policy.objects.create(**ROW, key=key)
    policy = Policy.objects.create(**ROW, key="anon")
    with pytest.raises(IntegrityError), transaction.atomic():
        Policy.objects.filter(pk=policy.pk).update(key=key)


def test_the_admin_form_accepts_anon_and_refuses_a_lookalike(admin_client: Any) -> None:
    refused = admin_client.post(ADD, {**FORM, "key": "anonymous"})
    assert refused.status_code == 200
    assert "&#x27;anonymous&#x27; is not a client key" in refused.content.decode()
    assert admin_client.post(ADD, {**FORM, "key": "anon"}).status_code == 302
    assert Policy.objects.get(name=FORM["name"]).key == "anon"
    help_text = admin_client.get(ADD).context["adminform"].form["key"].help_text
    assert "anon (requests without a user, by address" in help_text


def test_the_admin_filters_anon_policies(admin_client: Any) -> None:
    make_policy("by-ip", key="ip")
    make_policy("by-anon", key="anon")
    response = admin_client.get("/admin/ratelimits/policy/", {"key_kind": "anon"})
    assert [p.name for p in response.context["cl"].result_list] == ["by-anon"]
    assert "anonymous, by ip" in response.content.decode()


def test_a_sign_in_policy_cannot_be_keyed_anon() -> None:
    """A signed-in client can post a sign-in form too: an anon policy would never count
    its guesses."""
    row = {**ROW, "key": "anon", "counts": "sign_in_failures"}
    with pytest.raises(ValidationError) as refused:
        Policy(**row).full_clean()
    assert "an anon policy never counts it" in " ".join(refused.value.message_dict["key"])
    with pytest.raises(IntegrityError), transaction.atomic():
        Policy.objects.create(**row)
    Policy(**{**row, "counts": "failures"}).full_clean()  # any other counts is fine


def test_an_override_of_an_anon_policy_names_an_address(alice: Any) -> None:
    policy = create_policy("anon", key="anon")
    network = PolicyOverride(policy=policy, identity="10.0.0.0/8", limit=5)
    network.full_clean()
    network.save()
    assert network.identity == "ip:10.0.0.0/8"
    for identity, reason in [
        ("auth:key-one", "only by policies keyed by user or user_or_ip, not anon"),
        ("sk_live_abc", "Not an IP address or network"),
    ]:
        with pytest.raises(ValidationError, match=reason):
            PolicyOverride(policy=policy, identity=identity, limit=5).full_clean()
    group = Group.objects.create(name="partners")
    for target in ({"user": alice}, {"group": group}):
        with pytest.raises(ValidationError, match="never counts signed-in users"):
            PolicyOverride(policy=policy, limit=5, **target).full_clean()
    by_ip = create_policy("by-ip", key="ip")
    PolicyOverride(policy=by_ip, user=alice, limit=5).full_clean()  # as before


def test_a_policy_file_imports_an_anon_policy_and_its_address_override(alice: Any) -> None:
    row = {**ROW, "key": "anon", "overrides": [{"identity": "203.0.113.7", "limit": 9}]}
    apply_import(plan_import([row]))
    policy = Policy.objects.get()
    assert (policy.key, policy.overrides.get().identity) == ("anon", "ip:203.0.113.7")
    by_user = {**row, "overrides": [{"user": "alice", "limit": 9}]}
    (problem,) = problems_of([by_user])
    assert "A policy keyed by anon never counts signed-in users" in problem


def test_check_counts_an_anonymous_address_and_skips_a_user(redis_client: Any, alice: Any) -> None:
    create_policy("anon", "/api/items/", key="anon")
    record = run_json("check", "--path", "/api/items/", "--ip", "192.0.2.1")
    assert record["policies"][0]["identity"] == "ip:192.0.2.1"
    record = run_json("check", "--path", "/api/items/", "--ip", "192.0.2.1", "--user", "alice")
    assert record["policies"] == [
        {
            "policy": "anon",
            "identity": None,
            "skipped": "does not count signed-in users (leave out --user)",
        }
    ]
