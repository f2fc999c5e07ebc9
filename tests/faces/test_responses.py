"""The 429 of the middleware and the decorator: its body by Accept, Retry-After, the
RateLimit fields, and a project's own THROTTLED_VIEW (sync or async)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.http import HttpResponse

from ratelimits.exceptions import Throttled
from ratelimits.http.responses import prefers_json
from tests.helpers import create_policy, ratelimits_settings

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.urls")]

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def custom_throttled(request: Any, exception: Throttled) -> HttpResponse:
    """A project's THROTTLED_VIEW: its own page, no headers of its own."""
    policies = ",".join(d.policy for d in exception.verdict.decisions if d.blocks)
    return HttpResponse(f"slow down: {policies} {exception.retry_after}", status=429)


async def async_custom_throttled(request: Any, exception: Throttled) -> HttpResponse:
    response = HttpResponse("async page", status=429)
    response["Retry-After"] = "7"  # its own value is kept
    return response


def denied(client: Any, url: str = "/sync/", **extra: Any) -> Any:
    create_policy("p", url, limit=1)
    assert client.get(url, **extra).status_code == 200
    response = client.get(url, **extra)
    assert response.status_code == 429
    return response


@pytest.mark.parametrize(
    ("accept", "is_json"),
    [
        ("application/json", True),
        ("application/problem+json", True),
        ("text/html;q=0.5, application/json", True),
        (BROWSER, False),
        ("*/*", False),
        ("", False),
        ("application/json;q=0, text/plain", False),
        ("application/json;q=bad", False),
    ],
)
def test_the_accept_header_picks_the_body(accept, is_json):
    assert prefers_json(accept) is is_json


def test_json_for_json_clients(client):
    response = denied(client, HTTP_ACCEPT="application/json")
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content) == {
        "detail": "Too many requests. Try again in 60 seconds.",
        "retry_after": 60,
    }


def test_text_for_browsers(client):
    response = denied(client, HTTP_ACCEPT=BROWSER)
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content == b"Too many requests. Try again in 60 seconds.\n"
    assert response["Retry-After"] == "60"


def test_a_throttled_view_renders_the_429(client, settings):
    settings.RATELIMITS = ratelimits_settings(THROTTLED_VIEW=f"{__name__}.custom_throttled")
    response = denied(client)
    assert response.content == b"slow down: p 60"
    assert response["Retry-After"] == "60"  # added for it
    assert response["RateLimit"] == '"p";r=0;t=60'


@pytest.mark.parametrize("url", ["/sync/", "/async/"])
def test_an_async_throttled_view_on_either_path(client, async_client, settings, url):
    settings.RATELIMITS = ratelimits_settings(THROTTLED_VIEW=f"{__name__}.async_custom_throttled")
    create_policy("p", url, limit=1)
    sync_reply = [client.get(url) for _ in range(2)][1]
    async_reply = async_to_sync(async_client.get)(url)
    for response in (sync_reply, async_reply):
        assert response.status_code == 429
        assert response.content == b"async page"
        assert response["Retry-After"] == "7"
        assert response["RateLimit-Policy"] == '"p";q=1;w=60'


def test_a_throttled_view_that_cannot_be_imported_falls_back(client, settings, caplog):
    settings.RATELIMITS = ratelimits_settings(THROTTLED_VIEW="tests.nowhere.view")
    response = denied(client, HTTP_ACCEPT="application/json")
    assert json.loads(response.content)["retry_after"] == 60
    assert "THROTTLED_VIEW 'tests.nowhere.view' cannot be imported" in caplog.text
