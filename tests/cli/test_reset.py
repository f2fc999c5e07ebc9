"""``manage.py ratelimits reset``: a policy's keys deleted, all or one client's, with a dry
run and a confirmation."""

from __future__ import annotations

import sys
from io import StringIO

import pytest

from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.models import Policy
from tests.cli.traffic import V4, all_keys, dumps, hit, refused
from tests.helpers import Terminal, run, run_json

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("backend")]


def test_reset_dry_run_deletes_nothing(redis_client, reset_keys):
    before = dumps(redis_client, reset_keys["all"])
    text = run("reset", "--policy", "login", "--dry-run")
    assert text.splitlines() == [
        *sorted(reset_keys["login"]),
        "Dry run: would delete 3 keys for policy login.",
    ]
    text = run("reset", "--policy", "login", "--identity", "203.0.113.7", "--dry-run", "--yes")
    assert text.splitlines() == [
        "rl:{ip:203.0.113.7}:login:log",
        "Dry run: would delete 1 key for policy login, identity ip:203.0.113.7.",
    ]
    assert dumps(redis_client, all_keys(redis_client)) == before


def test_reset_yes_deletes_exactly_the_policys_keys(redis_client, reset_keys):
    text = run("reset", "--policy", "login", "--yes")
    assert text.splitlines()[-1] == "Deleted 3 keys for policy login."
    assert all_keys(redis_client) == reset_keys["all"] - reset_keys["login"]
    assert run("reset", "--policy", "login", "--yes") == "No keys for policy login.\n"


def test_reset_one_identity(redis_client, reset_keys):
    text = run("reset", "--policy", "login", "--identity", "203.0.113.7", "--yes")
    assert text.splitlines() == [
        "rl:{ip:203.0.113.7}:login:log",
        "Deleted 1 key for policy login, identity ip:203.0.113.7.",
    ]
    assert all_keys(redis_client) == reset_keys["all"] - {"rl:{ip:203.0.113.7}:login:log"}
    text = run("reset", "--policy", "login", "--identity", "198.51.100.99", "--yes")
    assert text == "No keys for policy login, identity ip:198.51.100.99.\n"


@pytest.mark.parametrize("stdin", [None, "", "y\n"])
def test_reset_without_yes_or_terminal_refuses(redis_client, reset_keys, monkeypatch, stdin):
    monkeypatch.setattr(sys, "stdin", None if stdin is None else StringIO(stdin))
    before = dumps(redis_client, reset_keys["all"])
    message = refused("reset", "--policy", "login")
    assert message == (
        "Delete 3 keys for policy login? Refusing without a terminal to confirm; pass --yes."
    )
    assert dumps(redis_client, all_keys(redis_client)) == before


def test_reset_asks_on_a_terminal(redis_client, reset_keys, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    text = run("reset", "--policy", "login")
    asked = capsys.readouterr()
    assert (asked.out, asked.err) == ("", "Delete 3 keys for policy login? [y/N] ")
    assert text.splitlines()[-1] == "Deleted 3 keys for policy login."
    assert all_keys(redis_client) == reset_keys["all"] - reset_keys["login"]


@pytest.mark.parametrize("answer", ["n\n", "\n", "", "yess\n"])
def test_reset_cancelled_on_a_terminal(redis_client, reset_keys, monkeypatch, capsys, answer):
    monkeypatch.setattr(sys, "stdin", Terminal(answer))
    before = dumps(redis_client, reset_keys["all"])
    assert refused("reset", "--policy", "login") == "Cancelled; nothing changed."
    assert "[y/N]" in capsys.readouterr().err
    assert dumps(redis_client, all_keys(redis_client)) == before


def test_reset_json_lists_the_keys_and_what_was_deleted(redis_client, reset_keys):
    login = sorted(reset_keys["login"])
    expected = {
        "policy": "login",
        "identity": None,
        "keys": login,
        "lockouts": 0,
        "dry_run": True,
        "deleted": 0,
    }
    assert run_json("reset", "--policy", "login", "--dry-run") == expected
    assert all_keys(redis_client) == reset_keys["all"]
    one = ["rl:{ip:203.0.113.7}:login:log"]
    assert run_json("reset", "--policy", "login", "--identity", "203.0.113.7", "--yes") == {
        **expected, "identity": V4, "keys": one, "dry_run": False, "deleted": 1
    }  # fmt: skip
    assert all_keys(redis_client) == reset_keys["all"] - set(one)
    assert run_json("reset", "--policy", "login", "--yes") == {
        **expected, "keys": [k for k in login if k not in one], "dry_run": False, "deleted": 2
    }  # fmt: skip
    assert run_json("reset", "--policy", "login", "--yes") == {
        **expected, "keys": [], "dry_run": False
    }  # fmt: skip
    assert all_keys(redis_client) == reset_keys["all"] - reset_keys["login"]


def test_reset_json_asks_on_stderr_so_stdout_stays_json(
    redis_client, reset_keys, monkeypatch, capsys
):
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    record = run_json("reset", "--policy", "login")
    assert record["deleted"] == 3
    assert capsys.readouterr().err == "Delete 3 keys for policy login? [y/N] "
    monkeypatch.setattr(sys, "stdin", None)
    hit(CompiledPolicy.from_model(Policy.objects.get(name="login")), V4)
    assert refused("reset", "--policy", "login", "--json").endswith("pass --yes.")
    assert "rl:{ip:203.0.113.7}:login:log" in all_keys(redis_client)


def test_reset_refusals(redis_client, reset_keys):
    before = dumps(redis_client, reset_keys["all"])
    assert refused("reset", "--policy", "logn", "--yes") == (
        "There is no policy 'logn'. Did you mean: login?"
    )
    assert "--policy" in refused("reset", "--yes")
    assert "is not an identity" in refused("reset", "--policy", "login", "--identity", "x", "--yes")
    assert dumps(redis_client, all_keys(redis_client)) == before
