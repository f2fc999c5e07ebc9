"""The decorator's rate is a default: the first request writes it as a policy, and from then
on the policy in the database decides; groups share a policy, names stay valid."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.exceptions import PermissionDenied
from django.test import override_settings

from ratelimits.contrib import django_ratelimit
from ratelimits.contrib.django_ratelimit import Ratelimited, declared, policy_rows, ratelimit
from ratelimits.engine.table import current as table
from ratelimits.models import Policy
from ratelimits.testutils import limits_off
from ratelimits.tools.policy_files import plan_import
from tests.contrib.django_ratelimit.views import limited_view, request
from tests.helpers import commands_sent

pytestmark = pytest.mark.django_db


def login(request: Any) -> Any:
    return request.limited


def statuses(view: Any, n: int, method: str = "post") -> list[bool]:
    return [bool(view(request(method))) for _ in range(n)]


def test_the_first_request_writes_the_rate_as_a_policy() -> None:
    view = ratelimit(key="ip", rate="2/m", method="POST", block=False)(login)
    assert not Policy.objects.exists()
    assert statuses(view, 3) == [False, False, True]
    policy = Policy.objects.get()
    # dr-tests-contrib-django_ratelimit-test_policies-login-ip-post-2-60s is 67
    # characters: the group is cut and a digest keeps it apart.
    assert policy.name.startswith("dr-tests-contrib-django_ratelimit-test-")
    assert policy.name.endswith("-ip-post-2-60s") and len(policy.name) <= 64
    # The endpoint is the name: no URL name or view path, so RateLimitMiddleware leaves it.
    assert (policy.endpoint, policy.methods, policy.algorithm) == (
        policy.name,
        "POST",
        "fixed_window",
    )
    assert (policy.limit, policy.window, policy.key, policy.fail_open) == (2, 60, "ip", False)
    policy.full_clean()
    (spec,) = [s for s in declared() if s.group == f"{__name__}.login"]
    assert spec is view.django_ratelimit_spec and view.django_ratelimit_specs == (spec,)
    assert policy_rows(spec) == spec.policy_rows()
    assert plan_import(policy_rows(spec)).unchanged  # the row is the policy as written


def test_the_policy_in_the_database_is_the_truth() -> None:
    view = ratelimit(group="search", key="ip", rate="5/m", block=False)(login)
    Policy.objects.create(
        name="dr-search-ip-all-5-60s",
        endpoint="search",
        algorithm="sliding_log",
        limit=1,
        window=60,
    )
    assert statuses(view, 2) == [False, True]
    Policy.objects.filter(name="dr-search-ip-all-5-60s").update(limit=3)  # an edit in the admin
    table.reset()  # the worker's next table
    assert statuses(view, 3) == [False, False, True]
    Policy.objects.filter(name="dr-search-ip-all-5-60s").update(methods="GET")
    table.reset()
    assert statuses(view, 3) == [False, False, False]  # POST no longer limited


def test_a_disabled_policy_limits_nothing_and_a_deleted_one_comes_back() -> None:
    view = ratelimit(group="search", key="ip", rate="1/m", block=False)(login)
    assert statuses(view, 2) == [False, True]
    Policy.objects.update(enabled=False)
    table.reset()
    assert statuses(view, 3) == [False] * 3
    assert Policy.objects.count() == 1
    Policy.objects.all().delete()
    table.reset()
    assert statuses(view, 1) == [True]  # written again, and the counter in Redis is kept
    assert Policy.objects.get().enabled


def test_views_of_one_group_share_a_policy_other_groups_do_not() -> None:
    first = limited_view("sync", {"group": "g", "key": "ip", "rate": "2/m", "block": False})
    second = limited_view("async", {"group": "g", "key": "ip", "rate": "2/m", "block": False})
    other = limited_view("sync", {"group": "h", "key": "ip", "rate": "2/m", "block": False})
    assert [first(request()), second(request()), first(request())] == [False, False, True]
    assert not other(request())
    assert sorted(Policy.objects.values_list("name", flat=True)) == [
        "dr-g-ip-all-2-60s",
        "dr-h-ip-all-2-60s",
    ]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"group": "a.b", "key": "header:X-Api-Key"}, "dr-a-b-h_x_api_key-all-1-60s"),
        ({"group": "a_b", "key": "user_or_ip", "method": "UNSAFE"}, None),
        ({"group": "x" * 300, "key": "ip"}, None),
        ({"group": "/login sign in", "key": "user", "method": ["put", "get"]}, None),
    ],
)
def test_names_and_endpoints_are_valid_policies(kwargs: dict[str, Any], name: str | None) -> None:
    if kwargs.get("method") == "UNSAFE":
        kwargs["method"] = ratelimit.UNSAFE
    view = ratelimit(rate="1/m", **kwargs)(login)
    policy = Policy(**{**view.django_ratelimit_spec.policy_rows()[0]})
    policy.full_clean()
    assert len(policy.name) <= 64
    assert name is None or policy.name == name


def test_names_keep_groups_apart() -> None:
    groups = ["a.b", "a-b", "a.b.c", "a.b-c", "x" * 70, "x" * 71, "a b"]
    names = {
        ratelimit(group=g, key="ip", rate="1/m")(login).django_ratelimit_spec.policy_name
        for g in groups
    }
    assert len(names) == len(groups)


def test_block_answers_with_ratelimits_429_by_default() -> None:
    view = ratelimit(key="ip", rate="1/m")(login)
    assert view(request()) is False
    response = view(request())
    assert response.status_code == 429 and "Retry-After" in response


@override_settings(RATELIMITS={"DJANGO_RATELIMIT_BLOCK": "raise"})
def test_block_raises_django_ratelimits_own_class_when_installed() -> None:
    import django_ratelimit.exceptions

    assert Ratelimited is django_ratelimit.exceptions.Ratelimited
    assert issubclass(Ratelimited, PermissionDenied)
    view = ratelimit(key="ip", rate="1/m")(login)
    view(request())
    with pytest.raises(Ratelimited):
        view(request())


@override_settings(RATELIMIT_ENABLE=False)
def test_ratelimit_enable_off_limits_nothing() -> None:
    view = ratelimit(key="ip", rate="1/m", block=False)(login)
    assert statuses(view, 3) == [False] * 3
    assert not Policy.objects.exists()


def test_the_block_setting_is_checked() -> None:
    with override_settings(RATELIMITS={"DJANGO_RATELIMIT_BLOCK": "403"}):
        found = [m for m in run_checks() if m.id == "ratelimits.E002"]
    assert any("DJANGO_RATELIMIT_BLOCK" in m.msg for m in found)


def test_the_package_says_what_it_exports() -> None:
    assert set(django_ratelimit.__all__) >= {"ratelimit", "Ratelimited", "declared"}
    assert ratelimit.ALL == (None,) and ratelimit.UNSAFE == ["DELETE", "PATCH", "POST", "PUT"]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_with_the_mode_off_nothing_is_written_or_asked(kind, redis_client) -> None:
    view = limited_view(kind, {"group": "off", "key": "ip", "rate": "1/m", "block": False})
    before = commands_sent(redis_client)
    with limits_off():
        assert [view(request("post")) for _ in range(3)] == [False] * 3
    assert commands_sent(redis_client) == before
    assert not Policy.objects.exists()
