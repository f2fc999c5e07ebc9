"""The admin's endpoint suggestions: URL names of plain views and django-ninja operations,
and the scopes of DRF views, decorated views and django-ninja throttles."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ratelimits.tools.endpoints import Suggestion, suggestions
from tests.helpers import ROOT


def found(urlconf: str) -> dict[str, str]:
    return {s.value: s.label for s in suggestions(urlconf)}


def test_plain_django_url_names_and_ninja_operations_of_the_demo():
    demo = found("project.urls")
    assert demo["login"] == "URL name of /accounts/login/"  # Django's LoginView
    assert demo["hello"] == "URL name of /hello/"  # an async function view
    assert demo["api:login"] == "URL name of /api/login/"
    assert demo["ninja:items"] == "django-ninja GET /ninja/items"
    assert demo["search"] == "throttle_scope of SearchView"
    assert not any(value.startswith(("admin:", "ratelimits:")) for value in demo)


def test_scopes_of_decorated_views():
    faces = found("tests.faces.urls")
    assert faces["decorated"].startswith("ratelimit(scope=...) on ")
    assert faces["monthly-reports"] == "ratelimit(scope=...) on ReportsView"  # method_decorator
    assert faces["decorated-sync"] == "URL name of /decorated/sync/"
    assert faces["sync"] == "URL name of /sync/"


def test_ninja_operations_and_the_scopes_of_their_throttles():
    values = suggestions("tests.faces.ninja_urls")
    by_value = {s.value: s.label for s in values}
    assert by_value["faces-ninja:plain"] == "django-ninja GET /ninja-test/plain"
    assert by_value["faces-ninja:routed_b"] == "django-ninja GET /ninja-test/router/b"
    # An operation's, a router's (on each of its operations: the first is kept):
    assert by_value["scoped"] == "PolicyThrottle(scope=...) on GET /ninja-test/scoped"
    assert by_value["routed"] == "PolicyThrottle(scope=...) on GET /ninja-test/router/a"
    assert by_value["async-scoped"] == "PolicyThrottle(scope=...) on GET /ninja-test/async-scoped"
    # URL names first, then scopes, each sorted.
    scopes = [s for s in values if "(scope=...)" in s.label]
    assert values[-len(scopes) :] == scopes
    assert [s.value for s in scopes] == ["async-scoped", "batch", "routed", "scoped", "status"]
    assert Suggestion("faces-ninja:plain", by_value["faces-ninja:plain"]) in values


@pytest.mark.django_db
def test_the_admin_offers_ninja_operations(admin_client):
    html = admin_client.get("/admin/ratelimits/policy/add/").content.decode()
    assert '<option value="ninja:items">django-ninja GET /ninja/items</option>' in html
    assert '<option value="login">URL name of /accounts/login/</option>' in html


#: Run with django-ninja impossible to import: the suggestions of a URLconf without it.
WITHOUT_NINJA = """
import json, sys

class NoNinja:
    def find_spec(self, name, path=None, target=None):
        if name == "ninja" or name.startswith("ninja."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NoNinja())
import django
django.setup()
from ratelimits.tools.endpoints import suggestions
values = {s.value: s.label for s in suggestions("tests.faces.urls")}
print(json.dumps({"values": values, "ninja": "ninja" in sys.modules}))
"""


def test_suggestions_without_django_ninja_installed():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_NINJA],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(result.stdout)
    assert report["ninja"] is False
    assert report["values"]["decorated"].startswith("ratelimit(scope=...) on ")
    assert report["values"]["api:login"] == "URL name of /api/login/"
