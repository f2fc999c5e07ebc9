"""A new user's first hour: the wheel installed into a fresh virtual environment, a project
made by ``django-admin startproject``, the README's Install section applied as written,
then a DRF view and a plain Django view served by ``runserver``. Both get their 429.

The environment has only what the wheel asks for (no extras), from the package index: so
this also shows the parts behind an extra saying which extra to install. Marked
``install`` (it needs the package index); ``.ci/run`` runs it once.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ratelimits.testutils import RedisServer, free_port, stop_process
from tests.wheel import REPO, build_wheel

pytestmark = [pytest.mark.slow, pytest.mark.install]

README = REPO / "README.md"

#: What the test adds to the project: its own views, not the README's.
VIEWS = """
from django.http import HttpResponse
from rest_framework.response import Response
from rest_framework.views import APIView


def plain(request):
    return HttpResponse("plain")


class Hello(APIView):
    def get(self, request):
        return Response({"hello": "drf"})


class Reports(APIView):
    throttle_scope = "reports"

    def get(self, request):
        return Response({"reports": []})
"""

URLS = """
from mysite import views

urlpatterns += [
    path("api/plain/", views.plain),
    path("api/hello/", views.Hello.as_view()),
    path("reports/", views.Reports.as_view()),
]
"""

#: A second policy, by DRF's throttle_scope: a path /api/* does not cover, so only DRF's
#: PolicyThrottle can apply it.
SCOPED = {
    "name": "reports",
    "endpoint": "reports",
    "algorithm": "sliding_log",
    "limit": 2,
    "window": 60,
}


def install_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Install\n")
    return text[start : text.index("\n## ", start + 1)]


def blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)


@dataclass
class Project:
    folder: Path
    python: Path
    env: dict[str, str]

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.python), *args],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if check:
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("manage.py", *args, check=check)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    """The project, set up as the README says, on a Redis server of its own."""
    top = tmp_path_factory.mktemp("fresh")
    wheel = build_wheel(top / "build").wheel
    venv = top / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(top), "LANG": "C.UTF-8"}
    # Only the package index's own settings: the environment of the test run is not the user's.
    # PIP_CONSTRAINT too: `make test-floor` installs the wheel's requirements at their floors.
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONFIG_FILE", "PIP_CONSTRAINT"):
        if name in os.environ:
            env[name] = os.environ[name]
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    installed = subprocess.run(
        [*pip, str(wheel)], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]

    folder = top / "site"
    folder.mkdir()
    subprocess.run(
        [str(venv / "bin" / "django-admin"), "startproject", "mysite", str(folder)],
        env=env,
        check=True,
        timeout=120,
    )
    with RedisServer() as redis_server:
        section = install_section()
        settings_block, urls_block = blocks(section, "python")
        readme_url = "redis://127.0.0.1:6379/0"
        assert readme_url in settings_block
        settings_file = folder / "mysite" / "settings.py"
        with settings_file.open("a", encoding="utf-8") as out:
            out.write("\n" + settings_block.replace(readme_url, redis_server.url))
        with (folder / "mysite" / "urls.py").open("a", encoding="utf-8") as out:
            out.write("\n" + urls_block + URLS)
        (folder / "mysite" / "views.py").write_text(VIEWS, encoding="utf-8")
        (policies,) = blocks(section, "json")
        (folder / "policies.json").write_text(policies, encoding="utf-8")
        scoped = {"version": 1, "policies": [*json.loads(policies)["policies"], SCOPED]}
        (folder / "scoped.json").write_text(json.dumps(scoped), encoding="utf-8")
        yield Project(folder, python, env)


@pytest.fixture(scope="module")
def served(project: Project) -> Iterator[int]:
    """``runserver`` on a free port, once the tables and the README's policy exist."""
    project.manage("migrate", "--noinput")
    imported = project.manage("ratelimits", "import", "policies.json")
    section = install_section()
    assert imported.stdout.strip() in section  # the output the README shows
    project.manage("ratelimits", "import", "scoped.json")
    port = free_port()
    log = (project.folder / "runserver.log").open("wb")
    process = subprocess.Popen(
        [str(project.python), "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=project.folder,
        env=project.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get(port, "/admin/login/")
                break
            except OSError:
                assert process.poll() is None, (project.folder / "runserver.log").read_text()
                assert time.monotonic() < deadline, "runserver did not answer in 60 s"
                time.sleep(0.2)
        yield port
    finally:
        stop_process(process)
        log.close()


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: str


def get(port: int, path: str) -> Reply:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        headers = {name.lower(): value for name, value in response.getheaders()}
        return Reply(response.status, headers, response.read().decode())
    finally:
        connection.close()


def test_the_project_passes_its_checks(project: Project) -> None:
    checked = project.manage("check")
    assert "System check identified no issues" in checked.stdout, checked.stderr


def test_a_plain_view_and_a_drf_view_get_their_429(served: int) -> None:
    """The README's policy (5 per 60 s for each client on /api/*): five requests, mixed
    between the plain view and the DRF view, then both views answer 429."""
    statuses = [get(served, path).status for path in ["/api/plain/", "/api/hello/"] * 2]
    statuses.append(get(served, "/api/plain/").status)
    assert statuses == [200] * 5
    for path in ("/api/plain/", "/api/hello/"):
        denied = get(served, path)
        assert denied.status == 429, path
        assert 1 <= int(denied.headers["retry-after"]) <= 60
        assert denied.headers["ratelimit-policy"] == '"api";q=5;w=60'
        assert denied.headers["ratelimit"].startswith('"api";r=0;t=')


def test_a_throttle_scope_is_applied_by_drf_s_throttle(served: int) -> None:
    allowed = [get(served, "/reports/") for _ in range(2)]
    assert [reply.status for reply in allowed] == [200, 200]
    assert allowed[-1].headers["ratelimit"].startswith('"reports";r=0;')
    denied = get(served, "/reports/")
    assert denied.status == 429
    assert 1 <= int(denied.headers["retry-after"]) <= 60
    assert "throttled" in json.loads(denied.body)["detail"]  # DRF's own 429 body


def test_the_parts_behind_extras_name_them(project: Project, served: int) -> None:
    metrics = get(served, "/ratelimits/metrics/")
    assert metrics.status == 501
    assert 'pip install "django-ratelimits[prometheus]"' in metrics.body

    exported = project.manage("ratelimits", "export", "policies.yaml", check=False)
    assert exported.returncode != 0
    assert 'pip install "django-ratelimits[yaml]"' in exported.stderr
    assert "Traceback" not in exported.stderr

    ninja = project.run("-c", "import ratelimits.contrib.ninja", check=False)
    assert ninja.returncode != 0
    assert 'pip install "django-ratelimits[ninja]"' in ninja.stderr
