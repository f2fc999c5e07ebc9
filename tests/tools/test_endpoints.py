"""The admin's endpoint suggestions: URL names of plain views and django-ninja operations,
and the scopes of DRF views, decorated views and django-ninja throttles."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ratelimits.tools.endpoints import EndpointIndex, Suggestion, suggestions
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
    values = suggestions("tests.contrib.ninja.urls")
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


# ------------------------------------------------- a DRF router's routes, by name and path

ROUTER = "tests.tools.router_urls"


def test_a_router_route_is_suggested_by_its_name_with_a_readable_path():
    routed = found(ROUTER)
    assert routed["api:product-list"] == "URL name of /api/products/"
    assert routed["api:product-detail"] == "URL name of /api/products/<pk>/"
    assert routed["orders"] == "throttle_scope of OrderViewSet"
    assert routed["order-export"] == "throttle_scope of /api/orders/export/"  # @action's
    labels = " ".join(routed.values())
    assert not any(regex in labels for regex in ("^", "$", "(?P", "\\."))


# ---------------------------------------- endpoints that match nothing, and their nearest


@pytest.mark.parametrize(
    ("endpoint", "nearest"),
    [
        ("odrers", "orders"),  # a typo'd scope
        ("api/orders/", "/api/orders/"),  # a path without its leading slash is a name
        ("api:prodcut-list", "api:product-list"),
        ("/api/order/", "/api/orders/"),
        ("/api/products/7/x/", "/api/products/*/"),
    ],
)
def test_an_endpoint_that_matches_nothing_and_the_nearest_one_that_does(endpoint, nearest):
    index = EndpointIndex(ROUTER)
    assert not index.matches(endpoint)
    assert index.nearest(endpoint) == nearest
    assert index.problem(endpoint) == f"matches no URL name, scope or path (nearest: {nearest})"


@pytest.mark.parametrize(
    "endpoint",
    [
        "orders",  # a viewset's throttle_scope
        "order-export",  # an @action's throttle_scope
        "api:product-detail",  # a router's URL name
        "/api/orders/",  # a path, as typed
        "/api/products/7/",  # a path with a parameter
        "/api/products/*",
        "/api/prod*",
        "/api/products/?/",
        "/api/products/[0-9]*/",
        "/api/products/abc*",
        "*.json",  # DRF's format suffix
        "*",
    ],
)
def test_an_endpoint_that_matches_a_name_scope_or_path(endpoint):
    index = EndpointIndex(ROUTER)
    assert index.matches(endpoint)
    assert index.problem(endpoint) is None


def test_a_glob_under_the_routers_root_matches_only_real_paths():
    # DefaultRouter's root takes a format suffix (/api/.json): it is no catch-all.
    index = EndpointIndex(ROUTER)
    assert not index.matches("/api/nope/*")
    assert not index.matches("/api/products/[!0-9a-z]")
    assert index.matches("/api/")


def test_the_demo_project_endpoints():
    index = EndpointIndex("project.urls")
    assert index.matches("search")  # SearchView's throttle_scope
    assert index.matches("api:login")
    assert index.matches("ninja:items")
    assert index.matches("/api/payment/*")
    assert index.matches("admin:login")  # a policy may limit the admin's login page
    assert index.matches("/admin/login/")
    assert index.nearest("serach") == "search"
    assert index.nearest("api/search/") == "/api/search/"
    assert not index.matches("/api/search")  # the URL has its trailing slash
    assert index.nearest("/api/search") == "/api/search/"
    assert index.problem("zzzzzzzz") == "matches no URL name, scope or path"


def test_the_decorators_scope_is_in_use():
    index = EndpointIndex("tests.faces.urls")
    assert index.matches("decorated")
    assert index.matches("monthly-reports")  # method_decorator on dispatch
    assert not index.matches("decorate")
    assert index.nearest("decorate") == "decorated"
