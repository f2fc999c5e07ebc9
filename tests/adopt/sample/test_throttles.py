"""The sample project's throttle tests, as a project writes them after ``adopt``: with the
``ratelimits_policies`` fixture, and as a ``TestCase`` with ``RateLimitsTestMixin``; a
limit lowered for one test with ``override_policy`` (where the project had
``override_settings(REST_FRAMEWORK={"DEFAULT_THROTTLE_RATES": ...})``)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import TestCase

from ratelimits.engine.table import builds
from ratelimits.testutils import RateLimitsTestMixin, clear_counters, override_policy
from tests.adopt.sample.conftest import ADOPTED

ITEMS = "/api/shared/items/"


def statuses(client, path: str, times: int) -> list[int]:
    return [client.get(path).status_code for _ in range(times)]


def test_the_fixture_loads_the_adopted_plan_and_builds_the_table_in_the_tests_thread(
    client, ratelimits_policies
):
    assert ratelimits_policies == ["drf-anon", "drf-burst", "drf-uploads", "drf-user"]
    assert not builds.in_background()  # the rows live in this test's open transaction
    assert statuses(client, ITEMS, 4) == [200, 200, 200, 429]  # drf-user: 3 per 60 s


def test_clear_counters_forgets_the_limiters_keys_and_only_those(
    client, ratelimits_policies, redis_client
):
    redis_client.set("sessions:kept", "1")  # the project's own key in the same Redis
    assert statuses(client, ITEMS, 4) == [200, 200, 200, 429]
    assert clear_counters() > 0
    assert redis_client.get("sessions:kept") == b"1"
    assert statuses(client, ITEMS, 1) == [200]


def test_override_policy_lowers_a_limit_for_the_block_and_keeps_the_counts(
    client, ratelimits_policies
):
    with override_policy("drf-user", limit=1):
        assert statuses(client, ITEMS, 2) == [200, 429]
    # 3 per 60 s again; the one admitted request still counts.
    assert statuses(client, ITEMS, 3) == [200, 200, 429]


@override_policy("drf-anon", limit=1)
def test_override_policy_as_a_decorator(client, ratelimits_policies):
    assert statuses(client, "/api/anonymous/", 2) == [200, 429]


def test_override_policy_names_what_it_cannot_do(ratelimits_policies):
    with pytest.raises(ValueError, match="There is no policy 'drf-users'"):
        override_policy("drf-users", limit=1).__enter__()
    with pytest.raises(ValueError, match="A policy has no field 'rate'"):
        override_policy("drf-user", rate="1/min").__enter__()
    with pytest.raises(ValueError, match="drf-user"):
        override_policy("drf-user", limit=0).__enter__()


class ThrottleTests(RateLimitsTestMixin, TestCase):
    """The same project's tests as Django ``TestCase``s."""

    ratelimits_policy_file = ADOPTED

    def test_the_user_limit(self) -> None:
        self.assertEqual(self.ratelimits_policies[-1], "drf-user")
        self.assertEqual(statuses(self.client, ITEMS, 4), [200, 200, 200, 429])

    def test_a_signed_in_user_has_a_counter_of_her_own(self) -> None:
        statuses(self.client, ITEMS, 3)
        self.client.force_login(User.objects.create_user("alice"))
        self.assertEqual(statuses(self.client, ITEMS, 4), [200, 200, 200, 429])

    @override_policy("drf-burst", limit=1)
    def test_a_lowered_limit(self) -> None:
        self.assertEqual(statuses(self.client, "/api/burst/", 2), [200, 429])
