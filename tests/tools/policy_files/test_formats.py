"""Reading a policy file: the format told from the name, JSON and YAML text (syntax
errors placed, tags refused, nesting, duplicate keys, PyYAML missing) and the shape of
the document."""

from __future__ import annotations

import sys

import pytest
import yaml

from ratelimits.tools.policy_files import (
    FORMATS,
    PolicyFileError,
    detect_format,
    dump_policies,
    parse_document,
)

pytestmark = pytest.mark.django_db


def parse_error(text: str, fmt: str, source: str = "policies.file") -> str:
    with pytest.raises(PolicyFileError) as raised:
        parse_document(text, fmt, source)
    return str(raised.value)


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
