"""Overrides in policy files: export, import (replace, validate, all or nothing), the
command's report, round trips, and an API key that never appears anywhere in clear."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from django.contrib.auth.models import Group, User
from django.core.management.base import CommandError
from django.db import IntegrityError, connection
from django.test import Client

from ratelimits.engine.table import current as table
from ratelimits.models import Policy, PolicyOverride
from ratelimits.tools.policy_files import (
    FORMATS,
    apply_import,
    dump_policies,
    parse_document,
    plan_import,
)
from ratelimits.validators import MAX_LIMIT
from tests.helpers import hashed, problems_of, run

pytestmark = pytest.mark.django_db

SECRET = "sk-live-Partner-ACME-9Qz"  # mixed case: a header value is not case-folded
ROW: dict[str, Any] = {"name": "api", "endpoint": "search", "limit": 10, "window": 60}
ROW["key"] = "header:X-Api-Key"


def row(*overrides: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The ``api`` policy's file row with ``fields`` changed and ``overrides``."""
    return {**ROW, **fields, "overrides": list(overrides)}


def overrides() -> list[tuple[Any, ...]]:
    """Every override with its policy's name and its client's name (what a file holds),
    sorted by those."""
    found = PolicyOverride.objects.values_list(
        "policy__name", "user__username", "group__name", "identity", "limit", "exempt", "comment"
    )
    return sorted(found, key=lambda values: tuple(str(value) for value in values))


def snapshot() -> list[tuple[Any, ...]]:
    """Both tables as stored, ids and timestamps included."""
    policies = list(Policy.objects.order_by("pk").values_list())
    return policies + list(PolicyOverride.objects.order_by("pk").values_list())


@pytest.fixture
def people() -> dict[str, Any]:
    alice = User.objects.create_user("alice")
    bob = User.objects.create_user("bob")
    partners = Group.objects.create(name="partners")
    Group.objects.create(name="staff")
    bob.groups.add(partners)
    return {"alice": alice, "bob": bob, "partners": partners}


@pytest.fixture
def world(people: dict[str, Any]) -> dict[str, Policy]:
    """Policies with one override of every kind (created out of order), and one without."""
    api = Policy.objects.create(**ROW)
    login = Policy.objects.create(
        name="login", endpoint="api:login", methods="POST", limit=5, window=300, key="ip"
    )
    plain = Policy.objects.create(name="plain", endpoint="/plain/*", limit=1, window=1)
    PolicyOverride.objects.create(policy=api, identity="203.0.113.7", exempt=True)
    PolicyOverride.objects.create(policy=api, identity=SECRET, limit=2, comment="ACME")
    PolicyOverride.objects.create(policy=api, group=people["partners"], exempt=True)
    PolicyOverride.objects.create(policy=api, identity="10.9.8.7/8", limit=50)
    PolicyOverride.objects.create(policy=api, user=people["alice"], limit=100, comment="plan B")
    PolicyOverride.objects.create(policy=login, identity="2001:db8::/48", limit=20)
    return {"api": api, "login": login, "plain": plain}


API_OVERRIDES = [
    {"user": "alice", "limit": 100, "comment": "plan B"},
    {"group": "partners", "exempt": True},
    {"identity": hashed(SECRET), "limit": 2, "comment": "ACME"},
    {"identity": "ip:10.0.0.0/8", "limit": 50},
    {"identity": "ip:203.0.113.7", "exempt": True},
]


# ---------------------------------------------------------------------------- export


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_row_lists_its_overrides_sorted(fmt: str, world: dict[str, Policy]) -> None:
    text = dump_policies(Policy.objects.all(), fmt)
    document = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    rows = {r["name"]: r for r in document["policies"]}
    assert list(rows["api"])[-1] == "overrides"
    assert rows["api"]["overrides"] == API_OVERRIDES
    assert [list(o) for o in rows["api"]["overrides"]] == [list(o) for o in API_OVERRIDES]
    assert rows["login"]["overrides"] == [{"identity": "ip:2001:db8::/48", "limit": 20}]
    assert rows["plain"]["overrides"] == []  # so that importing the file removes any


def test_the_yaml_of_an_override_reads_well(world: dict[str, Policy]) -> None:
    text = dump_policies(Policy.objects.filter(name="login"), "yaml")
    assert text.endswith(
        "  shards: 1\n  burst: null\n  cost: 1\n  counts: all\n"
        "  calendar: ''\n  time_zone: ''\n  lockout: 0\n  lockout_until_lifted: false\n"
        "  extend_lockout: false\n  reset_on_success: false\n  ipv6_prefix: null\n"
        "  traffic: true\n"
        "  overrides:\n  - identity: ip:2001:db8::/48\n    limit: 20\n"
    )


def test_the_export_does_not_depend_on_the_order_overrides_were_made(
    world: dict[str, Policy],
) -> None:
    before = dump_policies(Policy.objects.all(), "json")
    rows = list(PolicyOverride.objects.order_by("-pk"))
    PolicyOverride.objects.all().delete()
    for override in rows:
        override.pk = None
        override.save()
    assert dump_policies(Policy.objects.all(), "json") == before


def test_the_export_reads_the_overrides_in_one_query(
    world: dict[str, Policy], django_assert_num_queries: Any
) -> None:
    policies = list(Policy.objects.all())
    with django_assert_num_queries(1):  # overrides with their users and groups
        dump_policies(policies, "json")


# ------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_delete_import_gives_the_same_tables_and_text(
    fmt: str, world: dict[str, Policy]
) -> None:
    before = dump_policies(Policy.objects.all(), fmt)
    tables = (list(Policy.objects.order_by("name").values_list("name", "key")), overrides())
    Policy.objects.all().delete()
    assert not PolicyOverride.objects.exists()
    plan = plan_import(parse_document(before, fmt, "backup"))
    apply_import(plan)
    assert (list(Policy.objects.order_by("name").values_list("name", "key")), overrides()) == tables
    assert dump_policies(Policy.objects.all(), fmt) == before
    # The restored key still matches the client's requests.
    applied = table.load_table().get("api").for_client(None, hashed(SECRET))
    assert (applied.limit, applied.override) == (2, f"API key (hashed {hashed(SECRET)[2:10]}…)")


@pytest.mark.parametrize("fmt", FORMATS)
def test_importing_an_export_changes_nothing(fmt: str, world: dict[str, Policy]) -> None:
    before = snapshot()
    plan = plan_import(parse_document(dump_policies(Policy.objects.all(), fmt), fmt, "f"))
    assert not plan.changes
    assert [len(plan.overrides[name].unchanged) for name in ("api", "login", "plain")] == [5, 1, 0]
    apply_import(plan)
    assert snapshot() == before


def test_a_round_trip_through_the_command(world: dict[str, Policy], tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    assert run("export", str(path)) == (f"Exported 3 policies with 6 overrides to {path} (yaml).\n")
    before = overrides()
    Policy.objects.all().delete()
    out = run("import", str(path))
    assert out.endswith(
        "Imported "
        f"{path}: 3 created, 0 updated, 0 unchanged, 0 deleted; "
        "overrides: 6 created, 0 updated, 0 deleted.\n"
    )
    assert overrides() == before
    assert run("import", str(path)).endswith("Nothing to change.\n")


# ------------------------------------------------------------------------------ import


def test_the_list_replaces_the_policys_overrides(world: dict[str, Policy]) -> None:
    stored = {o.target_display: o for o in PolicyOverride.objects.filter(policy=world["api"])}
    alice, key = stored["user alice"], stored[f"API key (hashed {hashed(SECRET)[2:10]}…)"]
    plan = plan_import(
        [
            row(
                {"user": "alice", "limit": 100, "comment": "plan B"},  # unchanged
                {"identity": SECRET, "limit": 3, "comment": "ACME"},  # updated, typed in clear
                {"identity": "ip:10.0.0.0/8", "exempt": True},  # limit to exempt
                {"user": "bob", "limit": 7},  # created
            )  # the group and 203.0.113.7 are deleted
        ]
    )
    found = plan.overrides["api"]
    assert [o.target_display for o in found.unchanged] == ["user alice"]
    assert [(o.target_display, changed) for o, changed in found.updated] == [
        (key.target_display, ["limit"]),
        ("10.0.0.0/8", ["limit", "exempt"]),
    ]
    assert [o.target_display for o in found.created] == ["user bob"]
    assert sorted(o.target_display for o in found.deleted) == ["203.0.113.7", "group partners"]
    assert plan.unchanged == [world["api"]] and plan.changes
    apply_import(plan)
    assert [o for o in overrides() if o[0] == "api"] == [
        ("api", None, None, hashed(SECRET), 3, False, "ACME"),
        ("api", None, None, "ip:10.0.0.0/8", None, True, ""),
        ("api", "alice", None, "", 100, False, "plan B"),
        ("api", "bob", None, "", 7, False, ""),
    ]
    # Rows left alone keep their id and timestamps; updated ones keep created_at.
    again = PolicyOverride.objects.get(pk=alice.pk)
    assert (again.created_at, again.updated_at) == (alice.created_at, alice.updated_at)
    again = PolicyOverride.objects.get(pk=key.pk)
    assert again.created_at == key.created_at and again.updated_at > key.updated_at
    assert Policy.objects.get(name="api").updated_at == world["api"].updated_at


def test_a_row_without_overrides_leaves_them_alone(world: dict[str, Policy]) -> None:
    before = overrides()
    plan = plan_import([{**ROW, "limit": 11}])
    assert plan.overrides == {}
    apply_import(plan)
    assert overrides() == before
    assert Policy.objects.get(name="api").limit == 11


def test_an_empty_list_deletes_every_override(world: dict[str, Policy]) -> None:
    apply_import(plan_import([row()]))
    assert [o[0] for o in overrides()] == ["login"]


def test_a_new_policy_gets_its_overrides_hashed_with_its_own_header(people) -> None:
    rows = [
        {
            "name": "partners",
            "endpoint": "api:items",
            "limit": 10,
            "window": 60,
            "key": "header:X-Partner-Key",
            "overrides": [{"identity": SECRET, "exempt": True}, {"group": "partners", "limit": 9}],
        }
    ]
    apply_import(plan_import(rows))
    assert overrides() == [
        ("partners", None, None, hashed(SECRET, "X-Partner-Key"), None, True, ""),
        ("partners", None, "partners", "", 9, False, ""),
    ]


def test_a_key_typed_with_a_new_header_is_hashed_with_that_header(world) -> None:
    apply_import(plan_import([row({"identity": SECRET, "limit": 4}, key="header:X-Token")]))
    assert [o for o in overrides() if o[0] == "api"] == [
        ("api", None, None, hashed(SECRET, "X-Token"), 4, False, "")
    ]


def test_a_stored_hash_is_kept_as_written(world: dict[str, Policy]) -> None:
    other = "h:" + "0123456789abcdef" * 2  # from another site, say
    apply_import(plan_import([row({"identity": other, "limit": 4})]))
    assert [o[3] for o in overrides() if o[0] == "api"] == [other]


def test_prune_deletes_the_overrides_of_pruned_policies_and_says_so(
    world: dict[str, Policy], tmp_path: Path
) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{**ROW}]))
    out = run("import", str(path), "--prune", "--yes")
    assert out.splitlines() == [
        "unchanged: api",
        "deleted: login (overrides: 1 deleted)",
        "  deleted: override 2001:db8::/48: 20 per 300 s",
        "deleted: plain",
        f"Imported {path}: 0 created, 0 updated, 1 unchanged, 2 deleted; "
        "overrides: 0 created, 0 updated, 1 deleted.",
    ]
    assert {o[0] for o in overrides()} == {"api"}


def changes_to_world() -> list[dict[str, Any]]:
    """A file that changes ``world``: a policy field and overrides of ``api``, ``login``'s
    override dropped, two new policies (one with an override), ``plain`` left out."""
    return [
        row(
            {"user": "alice", "limit": 100, "comment": "plan B"},
            {"identity": SECRET, "limit": 3, "comment": "ACME"},
            {"user": "bob", "limit": 7},
            limit=12,
        ),
        {
            "name": "login",
            "endpoint": "api:login",
            "methods": "POST",
            "limit": 5,
            "window": 300,
            "key": "ip",
            "overrides": [],
        },
        {"name": "new", "endpoint": "/new/*", "limit": 1, "window": 1, "overrides": []},
        {
            "name": "newer",
            "endpoint": "/newer/*",
            "limit": 1,
            "window": 30,
            "overrides": [{"group": "partners", "exempt": True}],
        },
    ]


def test_an_override_of_a_concurrency_policy_is_reported_at_once(
    people: dict[str, Any], tmp_path: Path
) -> None:
    pool = Policy.objects.create(
        name="pool", endpoint="api:export", algorithm="concurrency", limit=2, window=30
    )
    PolicyOverride.objects.create(policy=pool, user=people["alice"], limit=4)
    assert str(pool.overrides.get()) == "user alice: 4 at once, lease 30 s"
    row = {
        "name": "pool",
        "endpoint": "api:export",
        "algorithm": "concurrency",
        "limit": 2,
        "window": 30,
        "overrides": [{"user": "alice", "limit": 5}, {"user": "bob", "limit": 3}],
    }
    path = tmp_path / "p.json"
    path.write_text(json.dumps([row]))
    assert run("import", str(path), "--dry-run").splitlines()[1:3] == [
        "  would be created: override user bob: 3 at once, lease 30 s",
        "  would be updated: override user alice: 5 at once, lease 30 s (limit)",
    ]


def test_dry_run_reports_the_override_changes_and_writes_nothing(
    world: dict[str, Policy], tmp_path: Path
) -> None:
    before = snapshot()
    path = tmp_path / "p.json"
    rows = changes_to_world()
    path.write_text(json.dumps(rows))
    out = run("import", str(path), "--dry-run")
    shown = f"API key (hashed {hashed(SECRET)[2:10]}…)"
    assert out.splitlines() == [
        "would be created: new",
        "would be created: newer (overrides: 1 created)",
        "  would be created: override group partners: exempt",
        "would be updated: api (limit; overrides: 1 created, 1 updated, 3 deleted)",
        "  would be created: override user bob: 7 per 60 s",
        f"  would be updated: override {shown}: 3 per 60 s (limit)",
        "  would be deleted: override 203.0.113.7: exempt",
        "  would be deleted: override group partners: exempt",
        "  would be deleted: override 10.0.0.0/8: 50 per 60 s",
        "would be updated: login (overrides: 1 deleted)",
        "  would be deleted: override 2001:db8::/48: 20 per 300 s",
        "Dry run: nothing changed.",
    ]
    assert SECRET not in out
    assert snapshot() == before
    out = run("import", str(path))
    assert out.splitlines()[-1] == (
        f"Imported {path}: 2 created, 2 updated, 0 unchanged, 0 deleted; "
        "overrides: 2 created, 1 updated, 4 deleted."
    )
    assert len(overrides()) == 4


def test_import_json_reports_every_change_as_the_file_writes_it(
    world: dict[str, Policy], tmp_path: Path
) -> None:
    before = snapshot()
    path = tmp_path / "p.json"
    path.write_text(json.dumps(changes_to_world()))
    planned = json.loads(run("import", str(path), "--dry-run", "--json"))
    expected = {
        "source": str(path),
        "applied": False,
        "created": ["new", "newer"],
        "updated": [{"name": "api", "fields": ["limit"]}, {"name": "login", "fields": []}],
        "unchanged": [],
        "deleted": [],
        "overrides": {
            "api": {
                "created": [{"user": "bob", "limit": 7}],
                "updated": [
                    {"identity": hashed(SECRET), "limit": 3, "comment": "ACME", "fields": ["limit"]}
                ],
                "deleted": [
                    {"identity": "ip:203.0.113.7", "exempt": True},
                    {"group": "partners", "exempt": True},
                    {"identity": "ip:10.0.0.0/8", "limit": 50},
                ],
            },
            "login": {"created": [], "updated": [], "deleted": [
                {"identity": "ip:2001:db8::/48", "limit": 20}
            ]},
            "newer": {"created": [{"group": "partners", "exempt": True}], "updated": [],
                      "deleted": []},
        },
    }  # fmt: skip
    assert planned == expected
    assert snapshot() == before
    assert json.loads(run("import", str(path), "--json")) == {**expected, "applied": True}
    assert len(overrides()) == 4
    again = json.loads(run("import", str(path), "--json"))
    assert again == {
        "source": str(path),
        "applied": False,
        "created": [],
        "updated": [],
        "unchanged": ["api", "login", "new", "newer"],  # plain is not in the file
        "deleted": [],
        "overrides": {},
    }
    assert SECRET not in json.dumps(planned)


# ---------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("entries", "lines"),
    [
        ([{"user": "carol", "limit": 5}], ["override 1: user: there is no user 'carol'."]),
        (
            [{"identity": "10.0.0.1", "limit": 5}, {"group": "admins", "exempt": True}],
            ["override 2: group: there is no group 'admins'."],
        ),
        (
            [{"identity": "10.0.0.1", "limit": 5, "exempt": True}],
            ["override 1: limit: Leave the limit blank for an exempt override."],
        ),
        (
            [{"identity": "10.0.0.1", "exempt": False}],
            ["override 1: limit: Give a limit, or tick exempt."],
        ),
        (
            [{"identity": "10.0.0.1", "limit": -1}],
            ["override 1: limit: Ensure this value is greater than or equal to 0."],
        ),
        (
            [{"identity": "10.0.0.1", "limit": MAX_LIMIT + 1}],
            [f"override 1: limit: Ensure this value is less than or equal to {MAX_LIMIT}."],
        ),
        (
            [{"identity": "10.0.0.1", "limit": 5, "comment": "x" * 201}],
            ["override 1: comment: Ensure this value has at most 200 characters (it has 201)."],
        ),
        (
            [{"identity": "10.0.0.1", "limit": 5}, {"identity": " ip:10.0.0.1", "exempt": True}],
            [
                "override 2: identity: 10.0.0.1 is also override 1; "
                "a policy has one override per client."
            ],
        ),
        (
            [{"identity": SECRET, "limit": 5}, {"identity": hashed(SECRET), "limit": 6}],
            [
                f"override 2: identity: API key (hashed {hashed(SECRET)[2:10]}…) is also "
                "override 1; a policy has one override per client."
            ],
        ),
        (
            [{"user": "alice", "limit": 5}, {"user": "alice", "limit": 6}],
            ["override 2: user: 'alice' is also override 1; a policy has one override per client."],
        ),
        (
            [{"limit": 5}, {"user": "alice", "group": "partners", "limit": 5}],
            [
                "override 1: name the client: a user, a group or an identity.",
                "override 2: name exactly one of user, group or identity, not user and group.",
            ],
        ),
        (
            [{"identity": "10.0.0.1", "limit": "5", "exempt": "no", "comment": 7, "why": 1}],
            [
                "override 1: unknown field(s) 'why'; the fields are user, group, identity, "
                "limit, exempt, comment.",
                "override 1: limit: must be an integer, not a string ('5').",
                "override 1: exempt: must be true or false, not a string ('no').",
                "override 1: comment: must be a string, not an integer (7).",
            ],
        ),
        (
            [{"user": 5, "limit": 5}, {"identity": " ", "limit": 5}, "10.0.0.1"],
            [
                "override 1: user: must be a name, not an integer (5).",
                "override 2: identity: must be a name, not a string (' ').",
                "override 3: expected a mapping of field names to values, not a string "
                "('10.0.0.1').",
            ],
        ),
    ],
)
def test_bad_overrides_name_the_row_the_override_and_the_field(
    world: dict[str, Policy], entries: list[Any], lines: list[str]
) -> None:
    before = snapshot()
    assert problems_of([row(*entries)]) == [f"row 1 (api): {line}" for line in lines]
    assert snapshot() == before


def test_an_ip_policy_refuses_what_is_not_an_address_without_echoing_a_key(world) -> None:
    entries = [
        {"identity": SECRET, "limit": 1},
        {"identity": "ip:10.0.0.256", "limit": 1},
        {"identity": "10.0.0.0/33", "limit": 1},
    ]
    not_an_address = (
        "Not an IP address or network (203.0.113.7, 10.0.0.0/8). API keys apply to "
        "policies keyed by header:NAME."
    )
    assert problems_of([{**ROW, "key": "ip", "overrides": entries}]) == [
        f"row 1 (api): override 1: identity: {not_an_address}",
        "row 1 (api): override 2: identity: 'ip:10.0.0.256' is not an IP address or network.",
        f"row 1 (api): override 3: identity: {not_an_address}",
    ]


@pytest.mark.parametrize(
    ("value", "described"),
    [(None, "null"), ({"user": "alice"}, "a mapping"), ("x", "a string ('x')")],
)
def test_overrides_must_be_a_list(world, value: Any, described: str) -> None:
    assert problems_of([{**ROW, "overrides": value}]) == [
        f"row 1 (api): overrides: must be a list of overrides, not {described}."
    ]


def test_every_problem_of_every_row_is_reported_and_nothing_is_written(
    world: dict[str, Policy], tmp_path: Path
) -> None:
    before = snapshot()
    rows = [
        row({"user": "alice", "limit": 1}),  # fine on its own
        {"name": "login", "endpoint": "api:login", "limit": 0, "window": 60, "key": "ip"}
        | {"overrides": [{"group": "nobody", "exempt": True}]},
        {"name": "plain", "endpoint": "/plain/*", "limit": 1, "window": 1}
        | {"overrides": [{"identity": "192.0.2.1", "limit": 1}, {"identity": "192.0.2.1/32"}]},
    ]
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"version": 1, "policies": rows}))
    with pytest.raises(CommandError) as raised:
        run("import", str(path))
    assert str(raised.value).splitlines() == [
        f"{path} was not imported; nothing changed.",
        "row 2 (login): limit: Ensure this value is greater than or equal to 1.",
        "row 2 (login): override 1: group: there is no group 'nobody'.",
        "row 3 (plain): override 2: identity: 192.0.2.1 is also override 1; "
        "a policy has one override per client.",
    ]
    assert snapshot() == before


def test_apply_is_all_or_nothing_when_an_override_collides(world: dict[str, Policy]) -> None:
    """Someone adds the same client between the plan and its writing: nothing is written."""
    before = overrides()
    plan = plan_import(
        [row({"identity": "198.51.100.1", "limit": 1}, limit=20), {**ROW, "name": "x"}]
    )
    PolicyOverride.objects.create(policy=world["api"], identity="198.51.100.1", limit=9)
    meanwhile = overrides()
    with pytest.raises(IntegrityError):
        apply_import(plan)
    assert overrides() == meanwhile != before
    assert Policy.objects.get(name="api").limit == 10
    assert not Policy.objects.filter(name="x").exists()


# ---------------------------------------------------------------- the key stays secret


def test_the_api_key_is_in_no_export_table_page_history_or_redis_key(
    admin_client: Client, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Typed in the admin, then used: only its keyed hash is anywhere."""
    policy = Policy.objects.create(**{**ROW, "limit": 1})
    data = {
        "name": "api",
        "mode": "enforce",
        "endpoint": "search",
        "algorithm": "sliding_counter",
        "limit": "1",
        "window": "60",
        "key": "header:X-Api-Key",
        "shards": "1",
        "cost": "1",
        "counts": "all",
        "enabled": "on",
        "fail_open": "on",
        "overrides-TOTAL_FORMS": "1",
        "overrides-INITIAL_FORMS": "0",
        "overrides-0-identity": SECRET,
        "overrides-0-limit": "2",
    }
    assert (
        admin_client.post(f"/admin/ratelimits/policy/{policy.pk}/change/", data).status_code == 302
    )
    table.reset()

    # The override applies to the key's requests (2, not the policy's 1), and not to others.
    statuses = [client.get("/api/search/", HTTP_X_API_KEY=SECRET).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert [client.get("/api/search/", HTTP_X_API_KEY="other").status_code for _ in range(2)] == [
        200,
        429,
    ]

    secret = SECRET.encode()
    names = list(redis_client.scan_iter(count=1000))
    assert any(hashed(SECRET).encode() in name for name in names)
    assert not any(secret.lower() in name.lower() for name in names)
    assert not any(secret in (redis_client.dump(name) or b"") for name in names)

    exported = run("export")
    assert SECRET not in exported and hashed(SECRET) in exported
    path = tmp_path / "p.yaml"
    run("export", str(path))
    assert SECRET not in path.read_text()

    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM ratelimits_policyoverride")
        rows = repr(cursor.fetchall())
        cursor.execute("SELECT change_message FROM django_admin_log")
        log = repr(cursor.fetchall())
    assert hashed(SECRET) in rows and SECRET not in rows and SECRET.lower() not in rows
    assert "API key (hashed" in log and SECRET not in log

    page = admin_client.get(f"/admin/ratelimits/policy/{policy.pk}/change/").content.decode()
    assert f"API key (hashed {hashed(SECRET)[2:10]}…)" in page and SECRET not in page
    assert SECRET not in run("check", "--path", "/api/search/", "--header", f"X-Api-Key={SECRET}")
