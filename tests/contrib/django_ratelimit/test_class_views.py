"""django-ratelimit's class-based view scenarios (RatelimitCBVTests), and the group it
gives a method that ``method_decorator`` wrapped, as :func:`specs_of` finds it."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils.decorators import method_decorator
from django.views.generic import View

from ratelimits.contrib.django_ratelimit import declared, ratelimit, specs_of
from ratelimits.models import Policy
from tests.contrib.django_ratelimit.views import request

pytestmark = pytest.mark.django_db


def test_method_decorator() -> None:
    class TestView(View):
        @method_decorator(ratelimit(key="ip", rate="1/m", block=False))
        def post(self, request: Any) -> Any:
            return request.limited

    view = TestView.as_view()
    assert not view(request("post"))
    assert view(request("post"))


def test_class_decorator() -> None:
    @method_decorator(ratelimit(key="ip", rate="1/m", block=False), name="get")
    class TestView(View):
        def get(self, request: Any) -> Any:
            return request.limited

    view = TestView.as_view()
    assert not view(request())
    assert view(request())


def test_async_method() -> None:
    from asgiref.sync import async_to_sync

    class TestView(View):
        @method_decorator(ratelimit(key="ip", rate="1/m", block=False))
        async def get(self, request: Any) -> Any:
            return request.limited

    view = async_to_sync(TestView.as_view())
    assert not view(request())
    assert view(request())


def test_wrap_view() -> None:
    class TestView(View):
        def get(self, request: Any) -> Any:
            return request.limited

    wrapped = ratelimit(key="ip", rate="1/m", block=False)(TestView.as_view())
    assert not wrapped(request())
    assert wrapped(request())


def test_methods_counted_separately() -> None:
    class TestView(View):
        @method_decorator(ratelimit(key="ip", rate="1/m", method="GET", block=False))
        def get(self, request: Any) -> Any:
            return request.limited

        @method_decorator(ratelimit(key="ip", rate="1/m", method="POST", block=False))
        def post(self, request: Any) -> Any:
            return request.limited

    view = TestView.as_view()
    assert not view(request())
    assert view(request())
    assert not view(request("post"))


def test_views_counted_separately() -> None:
    class TestView(View):
        @method_decorator(ratelimit(key="ip", rate="1/m", method="GET", block=False))
        def get(self, request: Any) -> Any:
            return request.limited

    class AnotherTestView(View):
        @method_decorator(ratelimit(key="ip", rate="1/m", method="GET", block=False))
        def get(self, request: Any) -> Any:
            return request.limited

    test_view, another_view = TestView.as_view(), AnotherTestView.as_view()
    assert not test_view(request())
    assert test_view(request())
    assert not another_view(request())
    groups = {
        s.group
        for s in declared()
        if s.policy_name in Policy.objects.values_list("name", flat=True)
    }
    assert groups == {
        f"{__name__}.TestView.test_views_counted_separately.<locals>.TestView.get",
        f"{__name__}.AnotherTestView.test_views_counted_separately.<locals>.AnotherTestView.get",
    }


def test_specs_of_a_class_based_view_name_its_groups_before_any_request() -> None:
    @method_decorator(ratelimit(key="ip", rate="5/m"), name="dispatch")
    class Dispatched(View):
        pass

    class Named(View):
        @method_decorator(ratelimit(group="reports", key="user", rate="100/h"))
        def get(self, request: Any) -> Any:
            return None

    (unknown,) = Dispatched.dispatch.django_ratelimit_specs
    with pytest.raises(ValueError, match="specs_of"):
        unknown.policy_rows()
    (spec,) = specs_of(Dispatched.as_view())
    # django-ratelimit's group: the method's module, the class it is called on, its qualname.
    assert spec.group == f"django.views.generic.base.{Dispatched.__name__}.View.dispatch"
    assert spec.policy_rows()[0]["endpoint"] == spec.policy_name
    (named,) = specs_of(Named.as_view())
    assert (named.group, named.policy_key, named.limit, named.window) == (
        "reports",
        "user",
        100,
        3600,
    )
    assert named in declared()
    assert all(s.group is not None for s in declared())
