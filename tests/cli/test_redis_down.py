"""The command when Redis does not answer: one line naming where, and the arguments still
checked first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management.base import CommandError

from ratelimits.testutils import free_port
from tests.cli.traffic import add_policy, refused
from tests.helpers import run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("backend")]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "args",
    [
        ("keys",),
        ("keys", "--policy", "login", "--identity", "203.0.113.7", "--json"),
        ("inspect", "rl:{ip:203.0.113.7}:login:log"),
        ("inspect", "--policy", "login", "--identity", "203.0.113.7", "--json"),
        ("reset", "--policy", "login", "--yes"),
        ("reset", "--policy", "login", "--dry-run"),
        ("check", "--path", "/api/login/", "--method", "POST", "--ip", "203.0.113.7"),
        ("check", "--path", "/nowhere/"),
    ],
)
def test_unreachable_redis_is_a_one_line_command_error(dead_redis, args, backend):
    add_policy("login", "api:login", methods="POST")
    with pytest.raises(CommandError) as raised:
        run(*args)
    message = str(raised.value)
    where = f"127.0.0.1:{dead_redis}"
    if backend == "cluster":
        where = f"cluster nodes {where}"
    assert message.startswith(f"Redis at {where} did not answer: ")
    assert "\n" not in message
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_without_redis_arguments_are_still_checked_first(dead_redis):
    add_policy("login", "api:login", methods="POST")
    assert "login" in run("policies")
    assert "is not an identity" in refused("keys", "--identity", "garbage")
    assert "not both" in refused("keys", "--identity", "192.0.2.1", "--match", "ip:*")
    assert "Did you mean: login?" in refused("keys", "--policy", "logn")
    assert "is not a ratelimits key" in refused("inspect", "nonsense")
    assert "Did you mean: login?" in refused("reset", "--policy", "logn", "--yes")
    assert "must start with /" in refused("check", "--path", "api/login/")


@pytest.mark.slow
def test_unreachable_redis_exits_1_without_a_traceback(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "REDIS_URL": f"redis://127.0.0.1:{port}/0",
    }

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    migrated = manage("migrate", "--verbosity", "0")
    assert migrated.returncode == 0, migrated.stderr
    done = manage("ratelimits", "keys")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"CommandError: Redis at 127.0.0.1:{port} did not answer: ")
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""
