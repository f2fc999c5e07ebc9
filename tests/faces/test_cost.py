"""A view's own cost through every face: the decorator's ``cost`` (an int or a callable
of the request), ``ratelimit_cost`` on a class-based or DRF view (an attribute or a
method), and the ninja throttle's ``cost``; the RateLimit field counts units."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync

from tests.helpers import create_policy

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.faces.urls")]


def remaining(response: Any) -> int:
    return int(response["RateLimit"].split(";r=")[1].split(";")[0])


@pytest.fixture(params=["wsgi", "asgi"])
def get(request: pytest.FixtureRequest) -> Any:
    if request.param == "wsgi":
        return request.getfixturevalue("client").get
    return async_to_sync(request.getfixturevalue("async_client").get)


def test_the_decorators_cost_is_spent_and_a_light_request_still_fits(get):
    create_policy("exports", "export", limit=10, window=60)
    responses = [get("/export/") for _ in range(4)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    assert [remaining(r) for r in responses[:3]] == [7, 4, 1]
    # The heavy request denied spent nothing: a light one takes the last unit.
    light = get("/export/rows/", {"rows": "1"})
    assert (light.status_code, remaining(light)) == (200, 0)


def test_a_cost_from_the_request(get):
    create_policy("exports", "export", limit=10, window=60)
    assert remaining(get("/export/rows/", {"rows": "6"})) == 4
    assert get("/export/rows/", {"rows": "5"}).status_code == 429
    assert remaining(get("/export/rows/", {"rows": "4"})) == 0


def test_a_failing_cost_is_logged_and_the_policys_cost_applies(client, caplog):
    create_policy("exports", "export", limit=10, window=60, cost=2)
    response = client.get("/export/broken/")  # no ?rows=: the callable raises KeyError
    assert response.status_code == 200
    assert remaining(response) == 8
    assert "ratelimit_cost failed" in caplog.text
    bad = client.get("/export/broken/", {"rows": "0"})  # not a cost: logged, policy's
    assert remaining(bad) == 6
    assert "ratelimit_cost gave 0" in caplog.text


@pytest.mark.parametrize("url", ["/heavy/", "/heavy-api/"])
def test_a_class_based_views_ratelimit_cost(get, url):
    create_policy("heavy", url, limit=10, window=60)
    responses = [get(url) for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 429]
    assert [remaining(r) for r in responses[:2]] == [6, 2]


def test_a_drf_views_cost_method(client):
    create_policy("batch", "/batch-api/", limit=10, window=60)
    first = client.get("/batch-api/", {"id": ["1", "2", "3"]})
    assert (first.status_code, remaining(first)) == (200, 7)
    assert remaining(client.get("/batch-api/")) == 6  # no ids: 1


@pytest.mark.urls("tests.contrib.ninja.urls")
def test_the_ninja_throttles_cost(client):
    create_policy("batch", "batch", limit=10, window=60)
    assert remaining(client.get("/ninja-test/batch", {"n": "7"})) == 3
    denied = client.get("/ninja-test/batch", {"n": "4"})
    assert denied.status_code == 429
    assert remaining(client.get("/ninja-test/batch", {"n": "3"})) == 0


def test_a_cost_above_what_the_policy_grants_is_a_429_for_the_window(client, caplog):
    create_policy("tiny-exports", "export", limit=2, window=60)
    responses = [client.get("/export/") for _ in range(2)]  # cost 3 > limit 2
    assert [r.status_code for r in responses] == [429, 429]
    assert responses[0]["Retry-After"] == "60"
    assert caplog.text.count("policy tiny-exports can never grant a cost of 3") == 1
