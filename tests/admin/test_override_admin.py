"""Overrides on the policy's admin page: the inline, its validation, hashing, history and
permissions. Every change goes through the admin's POST, as a browser sends it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, User
from django.test import Client

from ratelimits.engine.table import current as table
from ratelimits.models import Policy, PolicyOverride
from tests.helpers import hashed, history, make_policy, staff_client

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/ratelimits/policy/"
SECRET = "k3y-Of-Partner-ACME-7f2b"  # mixed case: a header value is not case-folded


def policy_fields(policy: Policy, **changes: Any) -> dict[str, str]:
    """The policy form's fields as the change page posts them back."""
    values = {
        name: getattr(policy, name)
        for name in ("name", "mode", "endpoint", "methods", "algorithm", "limit", "window")
    }
    values.update(key=policy.key, shards=policy.shards, cost=policy.cost, counts=policy.counts)
    values.update(enabled=policy.enabled, traffic=policy.traffic)
    values.update(fail_open=policy.fail_open, **changes)
    return {
        name: ("on" if value is True else str(value))
        for name, value in values.items()
        if value is not False
    }


def rows(*forms: dict[str, Any], initial: int = 0) -> dict[str, str]:
    """The override inline's POST data: its management form and ``forms``, the first
    ``initial`` of them existing rows (give their ``id``)."""
    data = {
        "overrides-TOTAL_FORMS": str(len(forms)),
        "overrides-INITIAL_FORMS": str(initial),
        "overrides-MIN_NUM_FORMS": "0",
        "overrides-MAX_NUM_FORMS": "1000",
    }
    for number, form in enumerate(forms):
        for name, value in form.items():
            if value is False or value is None:
                continue
            data[f"overrides-{number}-{name}"] = "on" if value is True else str(value)
    return data


def existing(override: PolicyOverride, **changes: Any) -> dict[str, Any]:
    """An existing override's row as the change page renders it, with ``changes``."""
    values: dict[str, Any] = {
        "id": override.pk,
        "policy": override.policy_id,
        "user": override.user_id or "",
        "group": override.group_id or "",
        "identity": override.identity,
        "limit": "" if override.limit is None else override.limit,
        "exempt": override.exempt,
        "comment": override.comment,
    }
    return {**values, **changes}


def save(client: Client, policy: Policy, *forms: dict[str, Any], initial: int = 0, **changes: Any):
    url = f"{CHANGELIST}{policy.pk}/change/"
    return client.post(url, {**policy_fields(policy, **changes), **rows(*forms, initial=initial)})


def inline_errors(response: Any) -> list[dict[str, list[str]]]:
    """Each inline form's errors on a page the admin re-rendered."""
    assert response.status_code == 200, "expected the form back with errors"
    (formset,) = response.context["inline_admin_formsets"]
    return [dict(form.errors) for form in formset.formset.forms]


def stored() -> list[tuple[Any, ...]]:
    return list(
        PolicyOverride.objects.order_by("pk").values_list(
            "policy__name",
            "user__username",
            "group__name",
            "identity",
            "limit",
            "exempt",
            "comment",
        )
    )


@pytest.fixture
def partners(alice: User) -> Group:
    group = Group.objects.create(name="partners")
    alice.groups.add(group)
    return group


# ------------------------------------------------------------------------- creating


def test_the_change_page_has_the_inline(admin_client):
    policy = make_policy("api")
    html = admin_client.get(f"{CHANGELIST}{policy.pk}/change/").content.decode()
    assert 'name="overrides-TOTAL_FORMS"' in html
    for name in ("user", "group", "identity", "limit", "exempt", "comment"):
        assert f'name="overrides-__prefix__-{name}"' in html
    # Users and groups are picked by id with a lookup, not a select of every user.
    assert 'id="id_overrides-__prefix__-user" class="vForeignKeyRawIdAdminField"' in html
    assert 'id="id_overrides-__prefix__-group" class="vForeignKeyRawIdAdminField"' in html


def test_create_a_user_override(admin_client, alice):
    policy = make_policy("api")
    response = save(admin_client, policy, {"user": alice.pk, "limit": 100, "comment": "plan B"})
    assert response.status_code == 302
    assert stored() == [("api", "alice", None, "", 100, False, "plan B")]
    applied = table.load_table().get("api").for_client(str(alice.pk), "ip:192.0.2.1")
    assert (applied.limit, applied.override) == (100, "user alice")


def test_create_a_group_override(admin_client, alice, partners):
    policy = make_policy("api")
    response = save(admin_client, policy, {"group": partners.pk, "exempt": True})
    assert response.status_code == 302
    assert stored() == [("api", None, "partners", "", None, True, "")]
    assert table.load_table().get("api").for_client(str(alice.pk), "ip:192.0.2.1") is None


@pytest.mark.parametrize(
    ("typed", "kept", "client", "other"),
    [
        ("203.0.113.7", "ip:203.0.113.7", "ip:203.0.113.7", "ip:203.0.113.8"),
        (" ip:203.0.113.7 ", "ip:203.0.113.7", "ip:203.0.113.7", "ip:203.0.113.8"),
        ("10.1.2.3/8", "ip:10.0.0.0/8", "ip:10.200.0.1", "ip:11.0.0.1"),
        ("2001:db8::/48", "ip:2001:db8::/48", "ip:2001:db8:0:7::/64", "ip:2001:db9::/64"),
    ],
)
def test_create_an_address_or_network_override(admin_client, typed, kept, client, other):
    policy = make_policy("api")
    response = save(admin_client, policy, {"identity": typed, "limit": 50})
    assert response.status_code == 302
    assert stored() == [("api", None, None, kept, 50, False, "")]
    compiled = table.load_table().get("api")
    assert compiled.for_client(None, client).limit == 50
    assert compiled.for_client(None, other) is compiled


def test_an_api_key_is_stored_hashed_as_the_limiter_hashes_it(admin_client):
    policy = make_policy("api", key="header:X-Api-Key")
    response = save(admin_client, policy, {"identity": SECRET, "limit": 500})
    assert response.status_code == 302
    assert stored() == [("api", None, None, hashed(SECRET), 500, False, "")]
    applied = table.load_table().get("api").for_client(None, hashed(SECRET))
    assert applied.limit == 500
    assert applied.override == f"API key (hashed {hashed(SECRET)[2:10]}…)"


def test_the_add_page_creates_a_policy_with_its_overrides(admin_client, alice):
    """A new policy has no pk while its overrides are validated: they are normalised all
    the same, and hashed with the header the new policy names."""
    data = {
        "name": "partners",
        "mode": "enforce",
        "endpoint": "api:items",
        "algorithm": "sliding_counter",
        "limit": "10",
        "window": "60",
        "key": "header:X-Partner-Key",
        "shards": "1",
        "cost": "1",
        "counts": "all",
        "enabled": "on",
        "fail_open": "on",
        **rows(
            {"identity": SECRET, "exempt": True},
            {"identity": "192.0.2.0/24", "limit": 20},
            {"user": alice.pk, "limit": 30},
        ),
    }
    response = admin_client.post(f"{CHANGELIST}add/", data)
    assert response.status_code == 302
    assert stored() == [
        ("partners", None, None, hashed(SECRET, "X-Partner-Key"), None, True, ""),
        ("partners", None, None, "ip:192.0.2.0/24", 20, False, ""),
        ("partners", "alice", None, "", 30, False, ""),
    ]


def test_the_add_page_refuses_a_bad_identity_for_the_new_policy(admin_client):
    data = {
        "name": "partners",
        "mode": "enforce",
        "endpoint": "api:items",
        "algorithm": "sliding_counter",
        "limit": "10",
        "window": "60",
        "key": "ip",
        "shards": "1",
        "cost": "1",
        "counts": "all",
        **rows({"identity": SECRET, "limit": 5}),
    }
    response = admin_client.post(f"{CHANGELIST}add/", data)
    assert inline_errors(response)[0]["identity"][0].startswith("Not an IP address or network")
    assert not Policy.objects.exists()
    assert not PolicyOverride.objects.exists()


def test_a_key_typed_with_a_new_header_is_hashed_with_that_header(admin_client):
    """The key the form now holds counts, not the stored one."""
    policy = make_policy("api", key="ip")
    response = save(admin_client, policy, {"identity": SECRET, "limit": 7}, key="header:X-Token")
    assert response.status_code == 302
    assert stored() == [("api", None, None, hashed(SECRET, "X-Token"), 7, False, "")]


# ---------------------------------------------------------------- editing and showing


def test_a_hashed_key_is_shown_described_and_kept_when_left_as_shown(admin_client):
    policy = make_policy("api", key="header:X-Api-Key")
    override = PolicyOverride.objects.create(policy=policy, identity=SECRET, limit=500)
    key = hashed(SECRET)
    assert override.identity == key
    page = admin_client.get(f"{CHANGELIST}{policy.pk}/change/").content.decode()
    shown = f"API key (hashed {key[2:10]}…)"
    assert f'name="overrides-0-identity" value="{shown}"' in page
    assert key not in page and SECRET not in page

    # Posted back as shown, with another comment: the stored hash stays.
    response = save(
        admin_client, policy, existing(override, identity=shown, comment="renewed"), initial=1
    )
    assert response.status_code == 302
    assert stored() == [("api", None, None, key, 500, False, "renewed")]
    assert history(policy) == [f"Changed Comment for override “{shown}: 500 per 60 s”."]


def test_a_row_left_as_shown_changes_nothing(admin_client):
    policy = make_policy("api", key="header:X-Api-Key")
    override = PolicyOverride.objects.create(policy=policy, identity=SECRET, limit=500)
    network = PolicyOverride.objects.create(policy=policy, identity="10.0.0.0/8", exempt=True)
    before = list(PolicyOverride.objects.order_by("pk").values())
    shown = f"API key (hashed {hashed(SECRET)[2:10]}…)"
    response = save(
        admin_client,
        policy,
        existing(override, identity=shown),
        existing(network, identity="10.0.0.0/8"),
        initial=2,
    )
    assert response.status_code == 302
    assert list(PolicyOverride.objects.order_by("pk").values()) == before
    assert history(policy) == ["No fields changed."]


def test_a_new_key_typed_over_the_shown_one_replaces_it(admin_client):
    policy = make_policy("api", key="header:X-Api-Key")
    override = PolicyOverride.objects.create(policy=policy, identity=SECRET, limit=500)
    response = save(admin_client, policy, existing(override, identity="n3w-key"), initial=1)
    assert response.status_code == 302
    assert stored() == [("api", None, None, hashed("n3w-key"), 500, False, "")]


def test_networks_are_shown_without_the_stored_prefix(admin_client):
    policy = make_policy("api")
    PolicyOverride.objects.create(policy=policy, identity="10.0.0.0/8", limit=9)
    page = admin_client.get(f"{CHANGELIST}{policy.pk}/change/").content.decode()
    assert 'name="overrides-0-identity" value="10.0.0.0/8"' in page


def test_change_and_delete_an_override(admin_client, alice, partners):
    policy = make_policy("api")
    user = PolicyOverride.objects.create(policy=policy, user=alice, limit=100)
    group = PolicyOverride.objects.create(policy=policy, group=partners, exempt=True)
    response = save(
        admin_client,
        policy,
        existing(user, limit=200),
        existing(group, DELETE=True),
        initial=2,
    )
    assert response.status_code == 302
    assert stored() == [("api", "alice", None, "", 200, False, "")]
    assert history(policy) == [
        "Changed Limit for override “user alice: 200 per 60 s”. "
        "Deleted override “group partners: exempt”."
    ]


# ------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("form", "field", "message"),
    [
        (
            {"identity": "not-an-address", "limit": 5},
            "identity",
            "Not an IP address or network (203.0.113.7, 10.0.0.0/8). API keys apply to "
            "policies keyed by header:NAME.",
        ),
        (
            {"identity": "ip:10.0.0.300", "limit": 5},
            "identity",
            "'ip:10.0.0.300' is not an IP address or network.",
        ),
        (
            {"identity": "10.0.0.0/8", "limit": 5, "exempt": True},
            "limit",
            "Leave the limit blank for an exempt override.",
        ),
        ({"identity": "10.0.0.0/8"}, "limit", "Give a limit, or tick exempt."),
        ({"identity": "10.0.0.0/8", "limit": -1}, "limit", "greater than or equal to 0"),
        ({"limit": 5}, "__all__", "Name exactly one of a user, a group or an identity."),
    ],
)
def test_bad_rows_are_refused_next_to_their_field(admin_client, form, field, message):
    policy = make_policy("api")
    response = save(admin_client, policy, form)
    (errors,) = inline_errors(response)
    assert list(errors) == [field], errors
    assert message in " ".join(errors[field])
    assert message.replace("'", "&#x27;") in response.content.decode()
    assert not PolicyOverride.objects.exists()
    assert history(policy) == []


def test_a_user_and_an_identity_in_one_row_are_refused(admin_client, alice):
    policy = make_policy("api")
    response = save(admin_client, policy, {"user": alice.pk, "identity": "10.0.0.1", "limit": 5})
    assert inline_errors(response) == [
        {"__all__": ["Name exactly one of a user, a group or an identity."]}
    ]
    assert not PolicyOverride.objects.exists()


def test_an_unknown_user_id_is_refused(admin_client):
    policy = make_policy("api")
    response = save(admin_client, policy, {"user": 999, "limit": 5})
    (errors,) = inline_errors(response)
    assert list(errors) == ["user"], errors
    assert not PolicyOverride.objects.exists()


def test_an_api_key_on_an_ip_policy_is_refused_without_echoing_it(admin_client):
    policy = make_policy("api", key="ip")
    response = save(admin_client, policy, {"identity": SECRET, "limit": 5})
    (errors,) = inline_errors(response)
    assert errors["identity"][0].startswith("Not an IP address or network")
    assert SECRET not in errors["identity"][0]
    assert not PolicyOverride.objects.exists()


def test_two_rows_naming_the_same_client_are_refused(admin_client, alice):
    policy = make_policy("api")
    response = save(
        admin_client,
        policy,
        {"identity": "203.0.113.7", "limit": 5},
        {"identity": "ip:203.0.113.7", "exempt": True},
        {"user": alice.pk, "limit": 5},
        {"user": alice.pk, "limit": 6},
    )
    duplicate = ["Another override names this client; keep one."]
    assert inline_errors(response) == [{}, {"identity": duplicate}, {}, {"user": duplicate}]
    assert not PolicyOverride.objects.exists()


def test_a_new_row_naming_a_stored_client_is_refused(admin_client):
    policy = make_policy("api")
    first = PolicyOverride.objects.create(policy=policy, identity="10.0.0.0/8", limit=9)
    response = save(
        admin_client,
        policy,
        existing(first, identity="10.0.0.0/8"),
        {"identity": "10.0.0.1/8", "limit": 3},
        initial=1,
    )
    duplicate = ["Another override names this client; keep one."]
    assert inline_errors(response) == [{}, {"identity": duplicate}]
    assert stored() == [("api", None, None, "ip:10.0.0.0/8", 9, False, "")]


def test_a_row_can_be_deleted_and_its_client_added_again_at_once(admin_client):
    policy = make_policy("api")
    first = PolicyOverride.objects.create(policy=policy, identity="10.0.0.0/8", limit=9)
    response = save(
        admin_client,
        policy,
        existing(first, identity="10.0.0.0/8", DELETE=True),
        {"identity": "10.0.0.0/8", "limit": 3},
        initial=1,
    )
    assert response.status_code == 302
    assert stored() == [("api", None, None, "ip:10.0.0.0/8", 3, False, "")]


# ------------------------------------------------------------------------- history


def test_every_inline_change_is_in_the_policys_history(admin_client, alice):
    policy = make_policy("api", key="header:X-Api-Key")
    save(
        admin_client, policy, {"user": alice.pk, "limit": 100}, {"identity": SECRET, "exempt": True}
    )
    user, key = PolicyOverride.objects.order_by("pk")
    shown = f"API key (hashed {hashed(SECRET)[2:10]}…)"
    save(
        admin_client,
        policy,
        existing(user, limit=150),
        existing(key, identity=shown, DELETE=True),
        initial=2,
    )
    assert history(policy) == [
        f"Added override “user alice: 100 per 60 s”. Added override “{shown}: exempt”.",
        "Changed Limit for override “user alice: 150 per 60 s”. "
        f"Deleted override “{shown}: exempt”.",
    ]
    assert not any(SECRET in message for message in history(policy))
    assert all(entry.content_type.model == "policy" for entry in LogEntry.objects.all())


# --------------------------------------------------------------------- permissions


def test_staff_without_override_permissions_see_no_inline_and_cannot_add(alice):
    policy = make_policy("api")
    PolicyOverride.objects.create(policy=policy, identity="10.0.0.0/8", limit=9)
    client = staff_client("view_policy", "change_policy")
    page = client.get(f"{CHANGELIST}{policy.pk}/change/").content.decode()
    assert "overrides-TOTAL_FORMS" not in page and "10.0.0.0/8" not in page
    response = save(client, policy, {"user": alice.pk, "exempt": True}, limit=7)
    assert response.status_code == 302  # the policy is saved; the rows are ignored
    assert Policy.objects.get().limit == 7
    assert stored() == [("api", None, None, "ip:10.0.0.0/8", 9, False, "")]


def test_view_only_override_permission_shows_rows_read_only(alice):
    policy = make_policy("api", key="header:X-Api-Key")
    PolicyOverride.objects.create(policy=policy, identity=SECRET, limit=9)
    client = staff_client("view_policy", "change_policy", "view_policyoverride")
    page = client.get(f"{CHANGELIST}{policy.pk}/change/").content.decode()
    assert f"API key (hashed {hashed(SECRET)[2:10]}…)" in page
    assert 'name="overrides-0-identity"' not in page  # shown, not editable
    assert hashed(SECRET) not in page and SECRET not in page
    response = save(client, policy, {"user": alice.pk, "exempt": True})
    assert response.status_code == 302
    assert stored() == [("api", None, None, hashed(SECRET), 9, False, "")]


def test_add_permission_alone_adds_but_neither_changes_nor_deletes(alice):
    policy = make_policy("api")
    first = PolicyOverride.objects.create(policy=policy, identity="10.0.0.0/8", limit=9)
    client = staff_client(
        "view_policy", "change_policy", "view_policyoverride", "add_policyoverride"
    )
    page = client.get(f"{CHANGELIST}{policy.pk}/change/").content.decode()
    assert 'name="overrides-__prefix__-identity"' in page  # new rows can be typed
    assert 'name="overrides-0-identity"' not in page  # the stored one is read-only
    assert 'name="overrides-0-DELETE"' not in page
    response = save(
        client,
        policy,
        existing(first, identity="10.0.0.0/8", limit=1, DELETE=True),
        {"user": alice.pk, "limit": 50},
        initial=1,
    )
    assert response.status_code == 302
    assert stored() == [
        ("api", None, None, "ip:10.0.0.0/8", 9, False, ""),
        ("api", "alice", None, "", 50, False, ""),
    ]


def test_a_new_row_naming_a_stored_client_it_cannot_change_is_refused(alice):
    """Without the change permission the stored row is not written, whatever its posted
    fields say: the new row is compared with the row as stored."""
    policy = make_policy("api")
    first = PolicyOverride.objects.create(policy=policy, identity="10.0.0.0/8", limit=9)
    client = staff_client(
        "view_policy", "change_policy", "view_policyoverride", "add_policyoverride"
    )
    response = save(
        client,
        policy,
        existing(first, identity="192.0.2.1"),
        {"identity": "10.0.0.0/8", "limit": 3},
        initial=1,
    )
    duplicate = ["Another override names this client; keep one."]
    assert inline_errors(response) == [{}, {"identity": duplicate}]
    assert stored() == [("api", None, None, "ip:10.0.0.0/8", 9, False, "")]


def test_delete_permission_deletes():
    policy = make_policy("api")
    first = PolicyOverride.objects.create(policy=policy, identity="10.0.0.0/8", limit=9)
    client = staff_client(
        "view_policy", "change_policy", "view_policyoverride", "delete_policyoverride"
    )
    response = save(client, policy, existing(first, identity="10.0.0.0/8", DELETE=True), initial=1)
    assert response.status_code == 302
    assert stored() == []
