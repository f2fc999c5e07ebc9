"""Writing a policy file: the exact JSON and YAML text, every field in order."""

from __future__ import annotations

import json

import pytest
import yaml

from ratelimits.models import Policy
from ratelimits.tools.policy_files import (
    FIELDS,
    FORMATS,
    PolicyFileError,
    dump_policies,
    parse_document,
)
from ratelimits.validators import MAX_WINDOW

pytestmark = pytest.mark.django_db


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
        '      "lockout_until_lifted": false,\n'
        '      "extend_lockout": false,\n'
        '      "reset_on_success": false,\n'
        '      "ipv6_prefix": null,\n'
        '      "traffic": true,\n'
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
        '      "lockout_until_lifted": false,\n'
        '      "extend_lockout": false,\n'
        '      "reset_on_success": false,\n'
        '      "ipv6_prefix": null,\n'
        '      "traffic": true,\n'
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
        "  lockout_until_lifted: false\n"
        "  extend_lockout: false\n"
        "  reset_on_success: false\n"
        "  ipv6_prefix: null\n"
        "  traffic: true\n"
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
        "  lockout_until_lifted: false\n"
        "  extend_lockout: false\n"
        "  reset_on_success: false\n"
        "  ipv6_prefix: null\n"
        "  traffic: true\n"
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
        "lockout_until_lifted": False,
        "extend_lockout": False,
        "reset_on_success": False,
        "ipv6_prefix": None,
        "traffic": True,
        "overrides": [],
    }


@pytest.mark.parametrize("fmt", FORMATS)
def test_dump_of_no_policies_reads_back_as_no_rows(fmt: str) -> None:
    text = dump_policies([], fmt)
    assert parse_document(text, fmt, "empty") == []


def test_dump_refuses_an_unknown_format() -> None:
    with pytest.raises(PolicyFileError, match="json, yaml"):
        dump_policies([], "toml")
