"""Policy files: format detection, export, parsing, the import plan and its all-or-nothing apply."""

from __future__ import annotations

import datetime
import json
import sys
from typing import Any

import pytest
import yaml
from django.db import IntegrityError

from ratelimits.models import Policy
from ratelimits.tools.policy_files import (
    FIELDS,
    FORMATS,
    ImportPlan,
    PolicyFileError,
    apply_import,
    detect_format,
    dump_policies,
    parse_document,
    plan_import,
)
from ratelimits.validators import MAX_WINDOW
from tests.helpers import problems_of

pytestmark = pytest.mark.django_db

ROW: dict[str, Any] = {"name": "login", "endpoint": "api:login", "limit": 5, "window": 60}


def row(**overrides: Any) -> dict[str, Any]:
    """A valid file row: :data:`ROW` with ``overrides``."""
    return {**ROW, **overrides}


def parse_error(text: str, fmt: str, source: str = "policies.file") -> str:
    with pytest.raises(PolicyFileError) as raised:
        parse_document(text, fmt, source)
    return str(raised.value)


def snapshot() -> list[tuple[Any, ...]]:
    """Every stored policy, timestamps included, to prove that nothing was written."""
    return list(Policy.objects.order_by("pk").values_list(*FIELDS, "created_at", "updated_at"))


@pytest.fixture
def varied() -> list[Policy]:
    """Policies that use every field, with values that YAML would misread unless quoted."""
    return [
        Policy.objects.create(name="search", endpoint="api:search", limit=30, window=60),
        Policy.objects.create(
            name="on",
            endpoint="*.json",
            methods="post,get",
            algorithm="sliding_log",
            limit=1,
            window=MAX_WINDOW,
            key="header:X-Api-Key",
            mode="shadow",
            fail_open=False,
            enabled=False,
        ),
        Policy.objects.create(
            name="123", endpoint="/api/*", algorithm="fixed_window", limit=100, window=1, key="ip"
        ),
        Policy.objects.create(
            name="null", endpoint="&anchor", methods="DELETE", limit=7, window=3600, key="global"
        ),
    ]


# --- detect_format --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "explicit", "expected"),
    [
        ("policies.json", None, "json"),
        ("policies.yaml", None, "yaml"),
        ("policies.yml", None, "yaml"),
        ("dir.v2/POLICIES.YML", None, "yaml"),
        ("POLICIES.JSON", None, "json"),
        (None, None, "json"),
        ("-", None, "json"),
        ("policies.json", "yaml", "yaml"),  # explicit wins over the extension
        ("policies.yaml", "JSON", "json"),  # case-insensitive
        ("policies.txt", "Yaml", "yaml"),  # and rescues an unknown extension
        ("-", "yaml", "yaml"),
        (None, "yaml", "yaml"),
    ],
)
def test_detect_format(path: str | None, explicit: str | None, expected: str) -> None:
    assert detect_format(path, explicit) == expected


@pytest.mark.parametrize("explicit", ["toml", "yml", "", "xml"])
def test_detect_format_refuses_an_unknown_explicit_format(explicit: str) -> None:
    with pytest.raises(PolicyFileError) as raised:
        detect_format("policies.json", explicit)
    message = str(raised.value)
    assert repr(explicit) in message
    assert all(fmt in message for fmt in FORMATS)


@pytest.mark.parametrize("path", ["policies.txt", "policies", "policies.json.bak", ".yaml"])
def test_detect_format_refuses_an_unknown_extension(path: str) -> None:
    with pytest.raises(PolicyFileError) as raised:
        detect_format(path)
    assert path in str(raised.value)
    assert "--format json|yaml" in str(raised.value)


# --- dump_policies ----------------------------------------------------------------------------


def test_json_dump_is_exact() -> None:
    Policy.objects.create(name="search", endpoint="api:search", limit=30, window=60)
    Policy.objects.create(
        name="login", endpoint="/login/", methods="post", limit=5, window=300, fail_open=False
    )
    text = dump_policies(Policy.objects.order_by("-name"), "json")
    assert text == (
        "{\n"
        '  "version": 1,\n'
        '  "policies": [\n'
        "    {\n"
        '      "name": "login",\n'
        '      "endpoint": "/login/",\n'
        '      "methods": "POST",\n'
        '      "algorithm": "sliding_counter",\n'
        '      "limit": 5,\n'
        '      "window": 300,\n'
        '      "key": "user_or_ip",\n'
        '      "mode": "enforce",\n'
        '      "fail_open": false,\n'
        '      "enabled": true,\n'
        '      "shards": 1,\n'
        '      "burst": null,\n'
        '      "cost": 1,\n'
        '      "counts": "all",\n'
        '      "calendar": "",\n'
        '      "time_zone": "",\n'
        '      "lockout": 0,\n'
        '      "ipv6_prefix": null,\n'
        '      "overrides": []\n'
        "    },\n"
        "    {\n"
        '      "name": "search",\n'
        '      "endpoint": "api:search",\n'
        '      "methods": "",\n'
        '      "algorithm": "sliding_counter",\n'
        '      "limit": 30,\n'
        '      "window": 60,\n'
        '      "key": "user_or_ip",\n'
        '      "mode": "enforce",\n'
        '      "fail_open": true,\n'
        '      "enabled": true,\n'
        '      "shards": 1,\n'
        '      "burst": null,\n'
        '      "cost": 1,\n'
        '      "counts": "all",\n'
        '      "calendar": "",\n'
        '      "time_zone": "",\n'
        '      "lockout": 0,\n'
        '      "ipv6_prefix": null,\n'
        '      "overrides": []\n'
        "    }\n"
        "  ]\n"
        "}\n"
    )


def test_yaml_dump_is_exact() -> None:
    Policy.objects.create(name="search", endpoint="api:search", limit=30, window=60)
    Policy.objects.create(name="123", endpoint="*.json", methods="get", limit=5, window=300)
    text = dump_policies(Policy.objects.order_by("-name"), "yaml")
    assert text == (
        "version: 1\n"
        "policies:\n"
        "- name: '123'\n"
        "  endpoint: '*.json'\n"
        "  methods: GET\n"
        "  algorithm: sliding_counter\n"
        "  limit: 5\n"
        "  window: 300\n"
        "  key: user_or_ip\n"
        "  mode: enforce\n"
        "  fail_open: true\n"
        "  enabled: true\n"
        "  shards: 1\n"
        "  burst: null\n"
        "  cost: 1\n"
        "  counts: all\n"
        "  calendar: ''\n"
        "  time_zone: ''\n"
        "  lockout: 0\n"
        "  ipv6_prefix: null\n"
        "  overrides: []\n"
        "- name: search\n"
        "  endpoint: api:search\n"
        "  methods: ''\n"
        "  algorithm: sliding_counter\n"
        "  limit: 30\n"
        "  window: 60\n"
        "  key: user_or_ip\n"
        "  mode: enforce\n"
        "  fail_open: true\n"
        "  enabled: true\n"
        "  shards: 1\n"
        "  burst: null\n"
        "  cost: 1\n"
        "  counts: all\n"
        "  calendar: ''\n"
        "  time_zone: ''\n"
        "  lockout: 0\n"
        "  ipv6_prefix: null\n"
        "  overrides: []\n"
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_dump_rows_hold_exactly_the_fields_in_order(fmt: str, varied: list[Policy]) -> None:
    text = dump_policies(Policy.objects.all(), fmt)
    document = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    assert list(document) == ["version", "policies"]
    assert document["version"] == 1
    assert [list(r) for r in document["policies"]] == [[*FIELDS, "overrides"]] * len(varied)
    assert [r["name"] for r in document["policies"]] == ["123", "null", "on", "search"]
    on = document["policies"][2]
    assert on == {
        "name": "on",
        "endpoint": "*.json",
        "methods": "GET,POST",
        "algorithm": "sliding_log",
        "limit": 1,
        "window": MAX_WINDOW,
        "key": "header:X-Api-Key",
        "mode": "shadow",
        "fail_open": False,
        "enabled": False,
        "shards": 1,
        "burst": None,
        "cost": 1,
        "counts": "all",
        "calendar": "",
        "time_zone": "",
        "lockout": 0,
        "ipv6_prefix": None,
        "overrides": [],
    }


@pytest.mark.parametrize("fmt", FORMATS)
def test_dump_of_no_policies_reads_back_as_no_rows(fmt: str) -> None:
    text = dump_policies([], fmt)
    assert parse_document(text, fmt, "empty") == []


def test_dump_refuses_an_unknown_format() -> None:
    with pytest.raises(PolicyFileError, match="json, yaml"):
        dump_policies([], "toml")


# --- Round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_dump_then_plan_is_all_unchanged(fmt: str, varied: list[Policy]) -> None:
    text = dump_policies(Policy.objects.all(), fmt)
    plan = plan_import(parse_document(text, fmt, f"policies.{fmt}"), prune=True)
    assert sorted(p.name for p in plan.unchanged) == ["123", "null", "on", "search"]
    assert (plan.created, plan.updated, plan.pruned) == ([], [], [])
    assert not plan.changes


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_delete_import_export_gives_the_same_text(fmt: str, varied: list[Policy]) -> None:
    before = dump_policies(Policy.objects.all(), fmt)
    Policy.objects.all().delete()
    plan = plan_import(parse_document(before, fmt, "backup"))
    assert sorted(p.name for p in plan.created) == ["123", "null", "on", "search"]
    apply_import(plan)
    assert Policy.objects.count() == 4
    assert dump_policies(Policy.objects.all(), fmt) == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_token_buckets_burst_and_a_cost_go_out_and_back(fmt: str) -> None:
    Policy.objects.create(
        name="bucket", endpoint="api:items", algorithm="token_bucket", limit=2, window=2, burst=4
    )
    Policy.objects.create(name="heavy", endpoint="api:export", limit=100, window=60, cost=25)
    text = dump_policies(Policy.objects.all(), fmt)
    Policy.objects.all().delete()
    apply_import(plan_import(parse_document(text, fmt, "backup")))
    stored = Policy.objects.order_by("name").values_list("name", "algorithm", "burst", "cost")
    assert list(stored) == [
        ("bucket", "token_bucket", 4, 1),
        ("heavy", "sliding_counter", None, 25),
    ]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"burst": 4}, "burst: Only a token_bucket policy has a burst"),
        ({"burst": "4"}, "burst: must be an integer, not a string ('4')"),
        ({"cost": None}, "cost: must be an integer, not null"),
        ({"cost": 0}, "cost: Ensure this value is greater than or equal to 1"),
    ],
)
def test_a_bad_burst_or_cost_in_a_file_is_named(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(PolicyFileError) as raised:
        plan_import([row(**fields)])
    assert problem in str(raised.value)
    assert not Policy.objects.exists()


@pytest.mark.parametrize("fmt", FORMATS)
def test_counts_and_a_concurrency_policy_go_out_and_back(fmt: str) -> None:
    Policy.objects.create(name="login", endpoint="api:login", limit=5, window=60, counts="failures")
    Policy.objects.create(
        name="orders", endpoint="api:orders", limit=50, window=60, counts="successes"
    )
    Policy.objects.create(
        name="pool", endpoint="api:export", algorithm="concurrency", limit=2, window=30
    )
    text = dump_policies(Policy.objects.all(), fmt)
    document = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    assert [r["counts"] for r in document["policies"]] == ["failures", "successes", "all"]
    Policy.objects.all().delete()
    apply_import(plan_import(parse_document(text, fmt, "backup")))
    stored = Policy.objects.order_by("name").values_list("name", "algorithm", "counts")
    assert list(stored) == [
        ("login", "sliding_counter", "failures"),
        ("orders", "sliding_counter", "successes"),
        ("pool", "concurrency", "all"),
    ]
    assert dump_policies(Policy.objects.all(), fmt) == text


def test_a_changed_counts_is_an_update_and_a_row_without_it_counts_all() -> None:
    Policy.objects.create(**ROW, counts="failures")
    (updated,) = plan_import([row(counts="successes")]).updated
    assert (updated[0].counts, updated[1]) == ("successes", ["counts"])
    # A file written before counts existed: the field takes its default, all.
    (updated,) = plan_import([row()]).updated
    assert (updated[0].counts, updated[1]) == ("all", ["counts"])


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"counts": "sometimes"}, "counts: Value 'sometimes' is not a valid choice."),
        ({"counts": None}, "counts: must be a string, not null."),
        ({"counts": True}, "counts: must be a string, not a boolean (true)."),
        (
            {"algorithm": "concurrency", "counts": "failures"},
            "counts: A concurrency policy gives every slot back when the response is done: "
            "choose all.",
        ),
    ],
)
def test_a_bad_counts_in_a_file_is_named(fields: dict[str, Any], problem: str) -> None:
    Policy.objects.create(name="keep", endpoint="api:keep", limit=1, window=1, counts="failures")
    before = snapshot()
    assert problems_of([row(**fields), row(name="fine")], prune=True) == [
        f"row 1 (login): {problem}"
    ]
    assert snapshot() == before


def test_json_and_yaml_files_of_the_same_policies_read_the_same(varied: list[Policy]) -> None:
    rows = {
        fmt: parse_document(dump_policies(Policy.objects.all(), fmt), fmt, "x") for fmt in FORMATS
    }
    assert rows["json"] == rows["yaml"]


# --- parse_document --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ('{"version": 1, "policies": [{"name": "a"}, {"name": "b"}]}', "json"),
        ('{"policies": [{"name": "a"}, {"name": "b"}]}', "json"),
        ('[{"name": "a"}, {"name": "b"}]', "json"),
        ("version: 1\npolicies:\n- name: a\n- name: b\n", "yaml"),
        ("policies:\n- name: a\n- name: b\n", "yaml"),
        ("- name: a\n- name: b\n", "yaml"),
        ("- name: a\n- name: b\n", "YAML"),
    ],
)
def test_parse_accepts_the_document_and_a_bare_list(text: str, fmt: str) -> None:
    assert parse_document(text, fmt, "f") == [{"name": "a"}, {"name": "b"}]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("text", ["", "   \n\n"])
def test_an_empty_file_is_an_error_not_zero_policies(fmt: str, text: str) -> None:
    assert "policies.x: the file is empty" in parse_error(text, fmt, "policies.x")


def test_a_yaml_file_of_comments_only_is_empty() -> None:
    assert "p.yaml: the file is empty" in parse_error("# nothing here\n", "yaml", "p.yaml")


def test_json_syntax_error_names_the_source_line_and_column() -> None:
    text = '{\n  "version": 1,\n  "policies": [\n    {"name": "a" "endpoint": "x"}\n  ]\n}\n'
    message = parse_error(text, "json", "policies.json")
    assert message.startswith("policies.json: line 4, column 18: ")
    assert "Expecting ',' delimiter" in message
    assert "\n" not in message


def test_yaml_syntax_error_names_the_source_line_and_column() -> None:
    text = "version: 1\npolicies:\n- name: a\n  endpoint: [x\n  limit: 5\n"
    message = parse_error(text, "yaml", "policies.yaml")
    # PyYAML's marks are 0-based; the message counts from 1 as editors do.
    assert message.startswith("policies.yaml: line 5, column 8: invalid YAML: ")
    assert "expected ',' or ']'" in message
    assert "\n" not in message


def test_yaml_tab_indentation_names_the_line() -> None:
    message = parse_error("policies:\n\t- name: a\n", "yaml", "p.yml")
    assert message.startswith("p.yml: line 2, column 1: ")


class Canary:
    """Constructed only by an unsafe YAML loader."""

    built = 0

    def __new__(cls) -> Canary:
        Canary.built += 1
        return super().__new__(cls)


def test_python_tags_are_refused_not_executed() -> None:
    text = f"policies:\n- !!python/object/new:{Canary.__module__}.Canary []\n"
    # The control: an unsafe loader would build the object.
    Canary.built = 0
    yaml.unsafe_load(text)
    assert Canary.built == 1

    Canary.built = 0
    message = parse_error(text, "yaml", "evil.yaml")
    assert Canary.built == 0
    assert message.startswith("evil.yaml: line 2, column 3: ")
    assert "could not determine a constructor" in message


def test_yaml_python_name_tags_are_refused() -> None:
    message = parse_error("!!python/name:os.system\n", "yaml", "evil.yaml")
    assert "evil.yaml: line 1, column 1: " in message
    assert "python/name:os.system" in message


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_byte_order_mark_is_ignored(fmt: str) -> None:
    assert parse_document('\ufeff[{"name": "a"}]', fmt, "p") == [{"name": "a"}]
    assert "p: the file is empty" in parse_error("\ufeff\n", fmt, "p")


@pytest.mark.parametrize(("fmt", "text"), [("json", "[" * 100_000), ("yaml", "[" * 100_000)])
def test_deep_nesting_is_an_error_not_a_crash(fmt: str, text: str) -> None:
    assert parse_error(text, fmt, "p").startswith("p: ")


def test_json_refuses_duplicate_keys() -> None:
    message = parse_error('[{"name": "a", "limit": 5, "limit": 50}]', "json", "p.json")
    assert message == "p.json: invalid JSON: duplicate key 'limit' in an object."


@pytest.mark.parametrize(
    ("text", "fmt", "expected"),
    [
        ('"policies"', "json", "not a string ('policies')"),
        ("5", "json", "not an integer (5)"),
        ("null", "json", "not null"),
        ("just words", "yaml", "not a string ('just words')"),
    ],
)
def test_the_wrong_top_level_shape_is_an_error(text: str, fmt: str, expected: str) -> None:
    message = parse_error(text, fmt, "p")
    assert message.startswith("p: expected a mapping with 'version' and 'policies' or a list")
    assert expected in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"version": 2, "policies": []}', "p: unsupported version an integer (2)"),
        ('{"version": "1", "policies": []}', "p: unsupported version a string ('1')"),
        ('{"version": true, "policies": []}', "p: unsupported version a boolean (true)"),
        ('{"version": 1.0, "policies": []}', "p: unsupported version a number (1.0)"),
        ('{"version": 1}', "p: the key 'policies' (a list of policies) is missing."),
        ('{"version": 1, "policies": {"name": "a"}}', "'policies' must be a list of policies"),
        ('{"version": 1, "policies": null}', "'policies' must be a list of policies, not null"),
        ('{"version": 1, "policy": []}', "p: unknown top-level key(s) 'policy'"),
    ],
)
def test_the_document_keys_are_checked(text: str, expected: str) -> None:
    assert expected in parse_error(text, "json", "p")


def test_a_row_that_is_not_a_mapping_is_named_by_number() -> None:
    text = "policies:\n- name: a\n- [name, b]\n- name: c\n- just a string\n"
    assert parse_error(text, "yaml", "p.yaml").splitlines() == [
        "p.yaml: row 2: expected a mapping of field names to values, not a list.",
        "p.yaml: row 4: expected a mapping of field names to values, "
        "not a string ('just a string').",
    ]


def test_parse_refuses_an_unknown_format() -> None:
    assert "json, yaml" in parse_error("[]", "toml")


def test_without_pyyaml_yaml_is_refused_and_json_still_works(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml raises ImportError
    assert 'PyYAML, which is not installed: pip install "django-ratelimits[yaml]"' in parse_error(
        "- name: a\n", "yaml"
    )
    with pytest.raises(PolicyFileError, match=r"django-ratelimits\[yaml\]"):
        dump_policies([], "yaml")
    assert parse_document('[{"name": "a"}]', "json", "p") == [{"name": "a"}]
    assert dump_policies([], "json") == '{\n  "version": 1,\n  "policies": []\n}\n'


# --- plan_import: classification -----------------------------------------------------------


def test_create_update_unchanged_and_prune() -> None:
    Policy.objects.create(name="same", endpoint="api:same", limit=5, window=60)
    Policy.objects.create(name="edit", endpoint="api:edit", limit=5, window=60)
    Policy.objects.create(name="gone", endpoint="api:gone", limit=5, window=60)
    rows = [
        {"name": "same", "endpoint": "api:same", "limit": 5, "window": 60},
        {"name": "edit", "endpoint": "api:edit", "limit": 50, "window": 60, "mode": "shadow"},
        {"name": "new", "endpoint": "/new/*", "limit": 1, "window": 1},
    ]

    plan = plan_import(rows)
    assert [p.name for p in plan.created] == ["new"]
    assert plan.created[0].pk is None
    assert [(p.name, changed) for p, changed in plan.updated] == [("edit", ["limit", "mode"])]
    assert [p.name for p in plan.unchanged] == ["same"]
    assert plan.pruned == []  # only with prune=True
    assert plan.changes

    plan = plan_import(rows, prune=True)
    assert [p.name for p in plan.pruned] == ["gone"]
    assert all(p.pk is not None for p in plan.pruned)

    apply_import(plan)
    assert sorted(Policy.objects.values_list("name", "limit", "mode")) == [
        ("edit", 50, "shadow"),
        ("new", 1, "enforce"),
        ("same", 5, "enforce"),
    ]
    assert not plan_import(rows, prune=True).changes


def test_changed_fields_are_listed_in_field_order() -> None:
    Policy.objects.create(name="login", endpoint="api:login", limit=5, window=60)
    new = row(
        enabled=False,
        key="ip",
        window=120,
        methods="post",
        endpoint="/login/",
        algorithm="fixed_window",
        fail_open=False,
    )
    ((policy, changed),) = plan_import([new]).updated
    assert changed == [
        "endpoint",
        "methods",
        "algorithm",
        "window",
        "key",
        "fail_open",
        "enabled",
    ]
    assert policy.methods == "POST"


def test_missing_optional_fields_take_the_model_defaults_on_update() -> None:
    """The file is the source of truth: a field left out is the default, not the stored value."""
    Policy.objects.create(
        name="login",
        endpoint="api:login",
        methods="POST",
        algorithm="sliding_log",
        limit=5,
        window=60,
        key="ip",
        mode="shadow",
        fail_open=False,
        enabled=False,
    )
    ((policy, changed),) = plan_import([row()]).updated
    assert changed == ["methods", "algorithm", "key", "mode", "fail_open", "enabled"]
    assert (policy.methods, policy.algorithm, policy.key, policy.mode) == (
        "",
        "sliding_counter",
        "user_or_ip",
        "enforce",
    )
    assert (policy.fail_open, policy.enabled) == (True, True)


def test_missing_optional_fields_take_the_model_defaults_on_create() -> None:
    (policy,) = plan_import([row()]).created
    defaults = Policy(**ROW)
    assert {f: getattr(policy, f) for f in FIELDS} == {f: getattr(defaults, f) for f in FIELDS}


def test_comparison_is_made_after_normalisation() -> None:
    Policy.objects.create(
        name="login", endpoint="api:login", methods="GET,POST", limit=5, window=60
    )
    plan = plan_import([row(methods="post, get", endpoint="  api:login ")])
    assert [p.name for p in plan.unchanged] == ["login"]
    assert plan.updated == []

    plan = plan_import([row(methods="post, get, delete")])
    assert [(p.methods, changed) for p, changed in plan.updated] == [
        ("GET,POST,DELETE", ["methods"])
    ]


def test_new_rows_are_normalised() -> None:
    (policy,) = plan_import([row(methods=" delete,get ", endpoint=" /x/ ")]).created
    assert (policy.methods, policy.endpoint) == ("GET,DELETE", "/x/")


def test_timestamps_do_not_count_as_changes() -> None:
    policy = Policy.objects.create(**ROW)
    long_ago = datetime.datetime(2001, 1, 1, tzinfo=datetime.UTC)
    Policy.objects.filter(pk=policy.pk).update(created_at=long_ago, updated_at=long_ago)
    plan = plan_import([row()])
    assert [p.name for p in plan.unchanged] == ["login"]
    assert not plan.changes


@pytest.mark.parametrize("name", ["created_at", "updated_at", "id"])
def test_timestamps_and_id_cannot_be_imported(name: str) -> None:
    value = 1 if name == "id" else "2001-01-01T00:00:00Z"
    (line,) = problems_of([row(**{name: value})])
    assert line.startswith(f"row 1 (login): unknown field(s) '{name}'")


def test_apply_saves_updates_with_a_new_updated_at_and_the_same_created_at() -> None:
    policy = Policy.objects.create(**ROW)
    long_ago = datetime.datetime(2001, 1, 1, tzinfo=datetime.UTC)
    Policy.objects.filter(pk=policy.pk).update(created_at=long_ago, updated_at=long_ago)
    apply_import(plan_import([row(limit=6)]))
    policy.refresh_from_db()
    assert policy.limit == 6
    assert policy.created_at == long_ago
    assert policy.updated_at > long_ago


def test_an_empty_list_with_prune_deletes_everything() -> None:
    Policy.objects.create(**ROW)
    plan = plan_import(parse_document('{"version": 1, "policies": []}', "json", "p"), prune=True)
    assert [p.name for p in plan.pruned] == ["login"]
    apply_import(plan)
    assert not Policy.objects.exists()


def test_plan_changes_property() -> None:
    stored = Policy(**ROW)
    assert not ImportPlan([], [], [], []).changes
    assert not ImportPlan([], [], [stored], []).changes
    assert ImportPlan([stored], [], [], []).changes
    assert ImportPlan([], [(stored, ["limit"])], [], []).changes
    assert ImportPlan([], [], [], [stored]).changes


# --- plan_import: what it refuses ------------------------------------------------------------


def test_unknown_field_is_named_with_the_known_ones() -> None:
    assert problems_of([row(limt=5)]) == [
        "row 1 (login): unknown field(s) 'limt'; the fields are name, endpoint, methods, "
        "algorithm, limit, window, key, mode, fail_open, enabled, shards, burst, cost, counts, "
        "calendar, time_zone, lockout, ipv6_prefix, overrides."
    ]


@pytest.mark.parametrize("missing", ["name", "endpoint", "limit", "window"])
def test_a_required_field_is_required(missing: str) -> None:
    rows = [row(name="first"), {k: v for k, v in ROW.items() if k != missing}]
    label = "row 2" if missing == "name" else "row 2 (login)"
    hint = " (or give a calendar)" if missing == "window" else ""
    assert problems_of(rows) == [f"{label}: {missing}: this field is required{hint}."]


@pytest.mark.parametrize(
    ("name", "value", "described"),
    [
        ("limit", True, "a boolean (true)"),
        ("limit", False, "a boolean (false)"),
        ("window", True, "a boolean (true)"),
        ("limit", "5", "a string ('5')"),
        ("limit", 5.0, "a number (5.0)"),
        ("window", None, "null"),
    ],
)
def test_limit_and_window_must_be_integers(name: str, value: Any, described: str) -> None:
    assert problems_of([row(**{name: value})]) == [
        f"row 1 (login): {name}: must be an integer, not {described}."
    ]


@pytest.mark.parametrize(
    ("name", "value", "described"),
    [
        ("fail_open", "false", "a string ('false')"),
        ("fail_open", "yes", "a string ('yes')"),
        ("enabled", 1, "an integer (1)"),
        ("enabled", 0, "an integer (0)"),
        ("enabled", None, "null"),
    ],
)
def test_fail_open_and_enabled_must_be_booleans(name: str, value: Any, described: str) -> None:
    assert problems_of([row(**{name: value})]) == [
        f"row 1 (login): {name}: must be true or false, not {described}."
    ]


@pytest.mark.parametrize(
    ("name", "value", "described"),
    [
        ("endpoint", 404, "an integer (404)"),
        ("endpoint", None, "null"),
        ("methods", ["GET", "POST"], "a list"),
        ("algorithm", None, "null"),
        ("key", {"header": "X"}, "a mapping"),
        ("mode", True, "a boolean (true)"),
        ("methods", datetime.date(2024, 1, 1), "a date (datetime.date(2024, 1, 1))"),
    ],
)
def test_text_fields_must_be_strings(name: str, value: Any, described: str) -> None:
    assert problems_of([row(**{name: value})]) == [
        f"row 1 (login): {name}: must be a string, not {described}."
    ]


def test_a_name_that_is_not_a_string_is_refused_and_the_row_has_no_label() -> None:
    assert problems_of([row(name=123)]) == ["row 1: name: must be a string, not an integer (123)."]


def test_yaml_typing_surprises_are_caught() -> None:
    """YAML reads ``no`` as false and ``5.0`` as a float: the strict types refuse both."""
    text = "- {name: login, endpoint: api:login, limit: 5.0, window: 60, mode: no}\n"
    assert problems_of(parse_document(text, "yaml", "p")) == [
        "row 1 (login): limit: must be an integer, not a number (5.0).",
        "row 1 (login): mode: must be a string, not a boolean (false).",
    ]


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        ({"limit": 0}, "limit: Ensure this value is greater than or equal to 1."),
        ({"limit": -3}, "limit: Ensure this value is greater than or equal to 1."),
        ({"window": 0}, "window: Ensure this value is greater than or equal to 1."),
        (
            {"window": MAX_WINDOW + 1},
            f"window: Ensure this value is less than or equal to {MAX_WINDOW}.",
        ),
        ({"algorithm": "leaky_bucket"}, "algorithm: Value 'leaky_bucket' is not a valid choice."),
        ({"algorithm": "Sliding_Log"}, "algorithm: Value 'Sliding_Log' is not a valid choice."),
        ({"mode": "audit"}, "mode: Value 'audit' is not a valid choice."),
        ({"endpoint": "api search"}, "endpoint: The endpoint cannot contain spaces"),
        ({"endpoint": "   "}, "endpoint: This field cannot be blank."),
        ({"methods": "GET,FETCH"}, "methods: Unknown HTTP method(s): FETCH."),
        ({"methods": "GET;POST"}, "methods: Unknown HTTP method(s): GET;POST."),
        ({"key": "cookie"}, "key: 'cookie' is not a client key."),
        ({"key": "header:Bad Name"}, "key: 'Bad Name' is not a valid HTTP header name"),
        ({"key": "user\n"}, "key: 'user\\n' is not a client key."),
        ({"key": ""}, "key: This field cannot be blank."),
        ({"endpoint": "x" * 201}, "endpoint: Ensure this value has at most 200 characters"),
    ],
)
def test_the_model_validation_is_reported_per_field(overrides: dict[str, Any], line: str) -> None:
    (problem,) = problems_of([row(**overrides)])
    assert problem.startswith(f"row 1 (login): {line}")


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("not a slug", "row 1 (not a slug)"),
        ("a/b", "row 1 (a/b)"),
        ("login\n", "row 1 ('login\\n')"),  # one line per problem, even so
        ("", "row 1"),
    ],
)
def test_a_bad_name_is_reported(name: str, label: str) -> None:
    problems = problems_of([row(name=name)])
    assert problems
    assert all(p.startswith(f"{label}: name: ") for p in problems)
    assert all("\n" not in p for p in problems)


def test_the_model_validation_applies_to_updates_too() -> None:
    Policy.objects.create(**ROW)
    assert problems_of([row(key="cookie")]) == [
        "row 1 (login): key: 'cookie' is not a client key. Use user, ip, user_or_ip, global, "
        "username or header:<Name>."
    ]


def test_duplicate_names_name_both_rows() -> None:
    rows = [row(), row(name="other"), row(limit=10)]
    assert problems_of(rows) == [
        "row 3 (login): name: 'login' is also the name of row 1; names must be unique."
    ]


def test_duplicate_names_of_a_stored_policy_are_refused() -> None:
    Policy.objects.create(**ROW)
    assert problems_of([row(limit=1), row(limit=2), row(limit=3)]) == [
        "row 2 (login): name: 'login' is also the name of row 1; names must be unique.",
        "row 3 (login): name: 'login' is also the name of row 1; names must be unique.",
    ]


def test_a_duplicate_row_is_still_validated() -> None:
    assert problems_of([row(), row(limit=0)]) == [
        "row 2 (login): name: 'login' is also the name of row 1; names must be unique.",
        "row 2 (login): limit: Ensure this value is greater than or equal to 1.",
    ]


def test_a_row_that_is_not_a_mapping_is_refused_by_the_plan_too() -> None:
    assert problems_of([row(), ["login"]]) == [
        "row 2: expected a mapping of field names to values, not a list."
    ]


def test_every_problem_of_every_row_is_reported_together_and_nothing_is_written() -> None:
    Policy.objects.create(name="keep", endpoint="api:keep", limit=5, window=60)
    Policy.objects.create(name="bad-update", endpoint="api:x", limit=5, window=60)
    before = snapshot()
    rows = [
        row(name="fine"),
        row(name="keep", limit=0),
        row(name="bad-update", window=True, key="cookie", colour="red"),
        {"name": "half", "limit": 3},
        row(name="fine"),
        row(name="new", algorithm="leaky_bucket", methods="FETCH", enabled="yes"),
    ]
    assert problems_of(rows, prune=True) == [
        "row 2 (keep): limit: Ensure this value is greater than or equal to 1.",
        "row 3 (bad-update): unknown field(s) 'colour'; the fields are name, endpoint, methods, "
        "algorithm, limit, window, key, mode, fail_open, enabled, shards, burst, cost, counts, "
        "calendar, time_zone, lockout, ipv6_prefix, overrides.",
        "row 3 (bad-update): window: must be an integer, not a boolean (true).",
        "row 3 (bad-update): key: 'cookie' is not a client key. Use user, ip, user_or_ip, "
        "global, username or header:<Name>.",
        "row 4 (half): endpoint: this field is required.",
        "row 4 (half): window: this field is required (or give a calendar).",
        "row 5 (fine): name: 'fine' is also the name of row 1; names must be unique.",
        "row 6 (new): enabled: must be true or false, not a string ('yes').",
        "row 6 (new): methods: Unknown HTTP method(s): FETCH. Use a comma-separated list of "
        "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, CONNECT, or leave blank for "
        "every method.",
        "row 6 (new): algorithm: Value 'leaky_bucket' is not a valid choice.",
    ]
    assert snapshot() == before


# --- plan_import never writes ----------------------------------------------------------------


def test_plan_import_never_writes() -> None:
    Policy.objects.create(name="same", endpoint="api:same", limit=5, window=60)
    Policy.objects.create(name="edit", endpoint="api:edit", limit=5, window=60)
    Policy.objects.create(name="gone", endpoint="api:gone", limit=5, window=60)
    long_ago = datetime.datetime(2001, 1, 1, tzinfo=datetime.UTC)
    Policy.objects.update(updated_at=long_ago)
    before = snapshot()

    plan = plan_import(
        [
            {"name": "same", "endpoint": "api:same", "limit": 5, "window": 60},
            {"name": "edit", "endpoint": "api:edit", "limit": 50, "window": 60},
            {"name": "new", "endpoint": "/new/*", "limit": 1, "window": 1},
        ],
        prune=True,
    )
    assert plan.created and plan.updated and plan.unchanged and plan.pruned
    assert snapshot() == before
    assert Policy.objects.count() == 3
    assert not Policy.objects.filter(name="new").exists()
    assert Policy.objects.get(name="edit").limit == 5
    assert set(Policy.objects.values_list("updated_at", flat=True)) == {long_ago}


# --- apply_import is all or nothing ----------------------------------------------------------


def test_apply_import_is_atomic_when_a_save_breaks_a_constraint() -> None:
    Policy.objects.create(name="first", endpoint="api:first", limit=5, window=60)
    Policy.objects.create(name="second", endpoint="api:second", limit=5, window=60)
    Policy.objects.create(name="gone", endpoint="api:gone", limit=5, window=60)
    before = snapshot()

    first, second, gone = (Policy.objects.get(name=n) for n in ("first", "second", "gone"))
    first.limit = 50
    second.window = 0  # not validated: the database constraint refuses it
    plan = ImportPlan(
        created=[Policy(name="new", endpoint="/new/*", limit=1, window=1)],
        updated=[(first, ["limit"]), (second, ["window"])],
        unchanged=[],
        pruned=[gone],
    )
    with pytest.raises(IntegrityError):
        apply_import(plan)
    assert snapshot() == before
    assert not Policy.objects.filter(name="new").exists()


def test_apply_import_is_atomic_when_the_last_step_fails() -> None:
    Policy.objects.create(name="first", endpoint="api:first", limit=5, window=60)
    Policy.objects.create(name="gone", endpoint="api:gone", limit=5, window=60)
    before = snapshot()

    first = Policy.objects.get(name="first")
    first.limit = 50
    plan = ImportPlan(
        created=[Policy(name="new", endpoint="/new/*", limit=1, window=1)],
        updated=[(first, ["limit"])],
        unchanged=[],
        # The stored one is deleted first, then the unsaved one cannot be.
        pruned=[Policy.objects.get(name="gone"), Policy(name="ghost")],
    )
    with pytest.raises(ValueError, match="id attribute is set to None"):
        apply_import(plan)
    assert snapshot() == before


def test_apply_import_is_atomic_when_a_create_collides() -> None:
    Policy.objects.create(name="taken", endpoint="api:taken", limit=5, window=60)
    before = snapshot()
    plan = ImportPlan(
        created=[
            Policy(name="new", endpoint="/new/*", limit=1, window=1),
            Policy(name="taken", endpoint="/x/", limit=1, window=1),
        ],
        updated=[],
        unchanged=[],
        pruned=[],
    )
    with pytest.raises(IntegrityError):
        apply_import(plan)
    assert snapshot() == before


def test_apply_import_writes_only_the_changed_fields() -> None:
    """``update_fields``: a concurrent edit of another field of the same policy survives."""
    Policy.objects.create(**ROW)
    ((policy, changed),) = plan_import([row(limit=6)]).updated
    assert changed == ["limit"]
    Policy.objects.filter(name="login").update(window=120)  # someone else, meanwhile
    apply_import(ImportPlan([], [(policy, changed)], [], []))
    assert Policy.objects.values_list("limit", "window").get(name="login") == (6, 120)
