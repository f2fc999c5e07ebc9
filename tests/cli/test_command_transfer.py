"""``manage.py ratelimits export`` and ``import``: policy files through the command."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management.base import CommandError

from ratelimits.models import Policy
from tests.helpers import Terminal, run

pytestmark = pytest.mark.django_db

FIELDS = ("name", "endpoint", "methods", "algorithm", "limit", "window", "key", "mode")
FIELDS += ("fail_open", "enabled")


def table() -> list[tuple[Any, ...]]:
    return [tuple(getattr(p, f) for f in FIELDS) for p in Policy.objects.order_by("name")]


@pytest.fixture
def policies() -> None:
    Policy.objects.create(
        name="login", endpoint="api:login", methods="POST", algorithm="sliding_log",
        limit=5, window=60, key="ip", fail_open=False,
    )  # fmt: skip
    Policy.objects.create(
        name="search", endpoint="search", limit=20, window=60, mode="shadow", enabled=False
    )
    Policy.objects.create(
        name="keys", endpoint="/api/v1/*", algorithm="fixed_window", limit=100, window=3600,
        key="header:X-Api-Key",
    )  # fmt: skip


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml"])
def test_round_trip_through_a_file_leaves_the_table_identical(
    policies: None, tmp_path: Path, suffix: str
) -> None:
    before = table()
    path = tmp_path / f"policies{suffix}"
    assert "Exported 3 policies" in run("export", str(path))
    first = path.read_text()
    Policy.objects.all().delete()
    out = run("import", str(path))
    assert "3 created, 0 updated, 0 unchanged, 0 deleted" in out
    assert table() == before
    run("export", str(path))
    assert path.read_text() == first


def test_export_to_stdout_is_json(policies: None) -> None:
    document = json.loads(run("export"))
    assert [row["name"] for row in document["policies"]] == ["keys", "login", "search"]
    assert document["policies"][1]["fail_open"] is False


def test_export_format_flag_overrides_the_extension(policies: None, tmp_path: Path) -> None:
    path = tmp_path / "policies.txt"
    run("export", str(path), "--format", "yaml")
    assert path.read_text().startswith("version: 1\npolicies:\n- name: keys\n")


def test_unknown_extension_asks_for_format(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--format json\\|yaml"):
        run("export", str(tmp_path / "policies.txt"))


def test_export_to_an_unwritable_place_is_a_clean_error(policies: None, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"Cannot write .*missing"):
        run("export", str(tmp_path / "missing" / "p.json"))


def test_yaml_without_pyyaml_names_the_extra_and_writes_nothing(
    policies: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml raises ImportError
    path = tmp_path / "policies.yaml"
    with pytest.raises(CommandError, match=r'pip install "django-ratelimits\[yaml\]"'):
        run("export", str(path))
    assert not path.exists()
    path.write_text("- name: a\n")
    with pytest.raises(CommandError, match=r'pip install "django-ratelimits\[yaml\]"'):
        run("import", str(path))
    assert Policy.objects.count() == 3


def test_import_reports_created_updated_unchanged(policies: None, tmp_path: Path) -> None:
    document = json.loads(run("export"))
    rows = {row["name"]: row for row in document["policies"]}
    rows["login"]["limit"] = 10
    rows["login"]["methods"] = "post, get"
    rows["new"] = {"name": "new", "endpoint": "api:new", "limit": 1, "window": 1}
    document["policies"] = list(rows.values())
    path = tmp_path / "p.json"
    path.write_text(json.dumps(document))
    out = run("import", str(path))
    assert "created: new" in out
    assert "updated: login (methods, limit)" in out
    assert "unchanged: keys" in out and "unchanged: search" in out
    login = Policy.objects.get(name="login")
    assert (login.limit, login.methods) == (10, "GET,POST")
    assert Policy.objects.count() == 4


def test_dry_run_changes_nothing(policies: None, tmp_path: Path) -> None:
    before = table()
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{"name": "login", "endpoint": "x", "limit": 1, "window": 1}]))
    out = run("import", str(path), "--dry-run", "--prune")
    assert "would be updated: login" in out
    assert "would be deleted: keys" in out and "would be deleted: search" in out
    assert "Dry run: nothing changed." in out
    assert table() == before


def test_prune_with_yes_deletes_policies_missing_from_the_file(
    policies: None, tmp_path: Path
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("- {name: login, endpoint: api:login, limit: 5, window: 60}\n")
    out = run("import", str(path), "--prune", "--yes")
    assert "deleted: keys" in out and "deleted: search" in out
    assert list(Policy.objects.values_list("name", flat=True)) == ["login"]


def test_prune_without_a_terminal_and_without_yes_refuses(
    policies: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    before = table()
    path = tmp_path / "p.yaml"
    path.write_text("- {name: login, endpoint: api:login, limit: 7, window: 60}\n")
    with pytest.raises(CommandError, match="pass --yes"):
        run("import", str(path), "--prune")
    assert table() == before


@pytest.mark.parametrize(("answer", "kept"), [("y\n", ["login"]), ("n\n", None)])
def test_prune_asks_on_a_terminal(
    policies: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    kept: list[str] | None,
) -> None:
    monkeypatch.setattr(sys, "stdin", Terminal(answer))
    before = table()
    path = tmp_path / "p.yaml"
    path.write_text("- {name: login, endpoint: api:login, limit: 7, window: 60}\n")
    if kept is None:
        with pytest.raises(CommandError, match="Cancelled"):
            run("import", str(path), "--prune")
        assert table() == before
    else:
        run("import", str(path), "--prune")
        assert list(Policy.objects.values_list("name", flat=True)) == kept
        assert Policy.objects.get(name="login").limit == 7


def test_a_bad_row_names_the_row_and_field_and_nothing_is_written(
    policies: None, tmp_path: Path
) -> None:
    before = table()
    path = tmp_path / "p.json"
    rows = [
        {"name": "fine", "endpoint": "api:fine", "limit": 1, "window": 1},
        {"name": "login", "endpoint": "api:login", "limit": 0, "window": 60},
        {"name": "other", "endpoint": "x", "limit": 1, "window": 1, "algoritm": "fixed_window"},
    ]
    path.write_text(json.dumps({"version": 1, "policies": rows}))
    with pytest.raises(CommandError) as info:
        run("import", str(path))
    message = str(info.value)
    assert "nothing changed" in message
    assert "row 2 (login): limit:" in message
    assert "row 3 (other): unknown field(s) 'algoritm'" in message
    assert table() == before
    assert not Policy.objects.filter(name="fine").exists()


def test_a_bad_counts_in_a_yaml_file_is_named_and_a_good_one_is_reported(
    policies: None, tmp_path: Path
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "policies:\n"
        "- {name: login, endpoint: api:login, limit: 5, window: 60, counts: sometimes}\n"
        "- {name: pool, endpoint: api:x, algorithm: concurrency, limit: 2, window: 30,\n"
        "   counts: failures}\n"
    )
    with pytest.raises(CommandError) as info:
        run("import", str(path))
    lines = str(info.value).splitlines()
    assert lines[0] == f"{path} was not imported; nothing changed."
    assert lines[1] == "row 1 (login): counts: Value 'sometimes' is not a valid choice."
    assert lines[2].startswith("row 2 (pool): counts: A concurrency policy gives every slot back")
    assert Policy.objects.get(name="login").counts == "all"
    assert not Policy.objects.filter(name="pool").exists()

    path.write_text(
        "policies:\n"
        "- {name: login, endpoint: api:login, methods: POST, algorithm: sliding_log, limit: 5,\n"
        "   window: 60, key: ip, fail_open: false, counts: failures}\n"
    )
    assert "updated: login (counts)" in run("import", str(path)).splitlines()
    assert Policy.objects.get(name="login").counts == "failures"


def test_malformed_json_says_where(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text('{"version": 1,\n "policies": [\n  {"name": "a",}\n]}\n')
    with pytest.raises(CommandError, match=r"p\.json: line 3, column \d+: invalid JSON"):
        run("import", str(path))


def test_malformed_yaml_says_where(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("policies:\n  - name: a\n   endpoint: [x\n")
    with pytest.raises(CommandError, match=r"p\.yaml: line \d+, column \d+: invalid YAML"):
        run("import", str(path))


def test_missing_file_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"Cannot read .*nope\.json: No such file"):
        run("import", str(tmp_path / "nope.json"))


def test_file_that_is_not_utf8_is_a_clean_error(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(b'[{"name": "\xff"}]')
    with pytest.raises(CommandError, match="Cannot read"):
        run("import", str(path))


def test_import_from_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"name": "piped", "endpoint": "api:piped", "limit": 3, "window": 9}]
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(rows)))
    out = run("import", "-")
    assert "Imported stdin: 1 created" in out
    assert Policy.objects.get(name="piped").rate_display == "3 per 9 s"


def test_importing_the_same_file_twice_changes_nothing_the_second_time(
    policies: None, tmp_path: Path
) -> None:
    path = tmp_path / "p.json"
    run("export", str(path))
    stamps = dict(Policy.objects.values_list("name", "updated_at"))
    out = run("import", str(path))
    assert "Nothing to change." in out
    assert dict(Policy.objects.values_list("name", "updated_at")) == stamps


def test_bad_format_choice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="invalid choice: 'xml'"):
        run("import", str(tmp_path / "p.json"), "--format", "xml")
