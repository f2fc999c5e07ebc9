"""The demo's plain Django faces with the demo's own policies (``manage.py demo_setup``):
Django's LoginView under ``signin`` and the async ``/hello/`` under ``hello``."""

from __future__ import annotations

import io

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command

from project.api.demo_policies import DEMO_POLICIES
from ratelimits.models import Policy

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_policies() -> None:
    call_command("demo_setup", stdout=io.StringIO())
    assert set(Policy.objects.values_list("name", flat=True)) == {p["name"] for p in DEMO_POLICIES}


def test_djangos_login_view_takes_five_posts_a_minute_per_address(client, demo_policies):
    wrong = {"username": "admin", "password": "wrong"}
    statuses = [client.post("/accounts/login/", wrong).status_code for _ in range(6)]
    assert statuses == [200] * 5 + [429]  # 200: the form again, with its error
    assert client.get("/accounts/login/").status_code == 200  # GET is not under signin
    # Another address still signs in.
    other = client.post("/accounts/login/", wrong, REMOTE_ADDR="198.51.100.4")
    assert other.status_code == 200


def test_the_async_hello_view_under_the_asgi_handler(async_client, demo_policies):
    get = async_to_sync(async_client.get)
    responses = [get("/hello/") for _ in range(11)]
    assert [r.status_code for r in responses] == [200] * 10 + [429]
    assert responses[0].json() == {"hello": "stranger"}
    assert responses[0]["RateLimit-Policy"] == '"hello";q=10;w=60'
