"""The two bugs of issue 44, replayed.

1. Without ``group``, the policy's endpoint was the view's dotted path, which is also
   Django's ``view_name`` of an unnamed URL pattern: ``RateLimitMiddleware`` enforced the
   policy itself, and a ``block=False`` view answered 429 (django-ratelimit: the view runs,
   with ``request.limited`` set).
2. The policy's identity left out the rate's count: two stacked decorators, or two views
   in one group, with the same key and period but different counts were one policy.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.http import JsonResponse
from django.test import Client, override_settings
from django.urls import path

from ratelimits.contrib.django_ratelimit import ratelimit
from ratelimits.engine.table.current import mark_changed
from ratelimits.models import Policy
from tests.contrib.django_ratelimit.views import limited_view, request

pytestmark = pytest.mark.django_db


@ratelimit(key="ip", rate="1/m", block=False)
def unnamed(request: Any) -> JsonResponse:
    return JsonResponse({"limited": request.limited})


urlpatterns = [path("unnamed/", unnamed)]  # no name: its view_name is its dotted path


@override_settings(
    ROOT_URLCONF=__name__,
    MIDDLEWARE=["ratelimits.middleware.RateLimitMiddleware"],
)
def test_a_block_false_view_without_group_runs_under_the_middleware() -> None:
    client = Client()
    answers = []
    for _ in range(4):
        answers.append(client.get("/unnamed/"))
        mark_changed()  # the table read again: it holds the policy the request wrote
    assert Policy.objects.count() == 1
    assert [r.status_code for r in answers] == [200, 200, 200, 200]
    assert [r.json()["limited"] for r in answers] == [False, True, True, True]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_stacked_decorators_differing_only_in_count_are_two_policies(kind: str) -> None:
    view = limited_view(
        kind,
        {"key": "ip", "rate": "2/m", "block": False},
        {"key": "ip", "rate": "10/m", "block": False},
    )
    assert [bool(view(request())) for _ in range(4)] == [False, False, True, True]
    assert Policy.objects.count() == 2


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_views_of_one_group_at_different_counts_count_apart(kind: str) -> None:
    one = limited_view(kind, {"group": "g", "key": "ip", "rate": "1/m", "block": False})
    three = limited_view(kind, {"group": "g", "key": "ip", "rate": "3/m", "block": False})
    assert [bool(one(request())) for _ in range(2)] == [False, True]
    assert [bool(three(request())) for _ in range(4)] == [False, False, False, True]
    assert sorted(Policy.objects.values_list("limit", flat=True)) == [1, 3]
