"""``manage.py ratelimits adopt``: the plan, the dry run and its file, idempotence, the
modes, and the throttles it names and leaves alone (the replays are in tests/adopt/)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.test import override_settings
from rest_framework.throttling import AnonRateThrottle

from ratelimits.models import Policy
from ratelimits.tools.adoption import plan_adoption
from ratelimits.tools.adoption.rows import counter_row
from ratelimits.tools.adoption.throttles import ANON, read_throttle
from tests.helpers import run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("drf_site")]

ODD_URLS = "tests.adopt.odd_urls"


def stored() -> dict[str, tuple[str, str, int, int, str]]:
    return {p.name: (p.endpoint, p.key, p.limit, p.window, p.mode) for p in Policy.objects.all()}


def test_shadow_is_the_default_mode():
    out = run("adopt")
    assert (
        "Adopted: 4 created, 0 updated, 0 unchanged (each stored policy's mode kept, new ones "
        "in shadow)." in out
    )
    assert {mode for *_, mode in stored().values()} == {"shadow"}


def test_running_twice_changes_nothing_the_second_time():
    run("adopt")
    before = {p.name: p.updated_at for p in Policy.objects.all()}
    out = run("adopt")
    assert "unchanged: drf-user: " in out and "Nothing to change." in out
    assert {p.name: p.updated_at for p in Policy.objects.all()} == before


def test_enforce_after_shadow_changes_only_the_mode_and_keeps_the_operators_fields():
    run("adopt")
    Policy.objects.filter(name="drf-user").update(fail_open=False)
    out = run("adopt", "--mode", "enforce")
    assert "updated (mode): drf-user: " in out
    assert "Adopted: 0 created, 4 updated, 0 unchanged (enforce)." in out
    policy = Policy.objects.get(name="drf-user")
    assert (policy.mode, policy.fail_open) == ("enforce", False)


def test_dry_run_writes_nothing_and_its_file_imports_as_adopt_would(tmp_path):
    target = tmp_path / "adopted.json"
    out = run("adopt", "--dry-run", "--output", str(target))
    assert "would be created: drf-uploads: " in out and "Dry run: nothing changed." in out
    assert Policy.objects.count() == 0
    rows = json.loads(target.read_text())["policies"]
    assert [row["name"] for row in rows] == ["drf-anon", "drf-burst", "drf-uploads", "drf-user"]

    run("import", str(target))
    imported = stored()
    Policy.objects.all().delete()
    run("adopt")
    assert stored() == imported


def test_dry_run_prints_the_file_after_the_plan_or_alone_on_stdout():
    out = run("adopt", "--dry-run", "--format", "json")
    plan, document = out.split("`import` accepts it):\n")
    assert "would be created: drf-user" in plan
    assert len(json.loads(document)["policies"]) == 4
    errors = StringIO()
    piped = run("adopt", "--dry-run", "--output", "-", stderr=errors)
    assert len(json.loads(piped)["policies"]) == 4
    assert "Dry run: nothing changed." in errors.getvalue()


def test_a_custom_throttle_is_named_and_skipped_and_the_anonymous_one_adopted():
    out = run("adopt")
    assert (
        "skipped: EveryOtherThrottle: it is not a SimpleRateThrottle: its allow_request() "
        "is its own, and ratelimits cannot tell what it admits\n  on /api/custom/ (custom)"
    ) in out
    assert (
        "created: drf-anon: sliding_log, 4 per 60 s per anon, endpoint anonymous, shadow; "
        "replaces AnonRateThrottle 4/min on 1 route\n"
    ) in out
    assert "AnonRateThrottle (scope anon)" not in out  # not among the skipped
    assert set(stored()) == {"drf-anon", "drf-user", "drf-uploads", "drf-burst"}


@override_settings(ROOT_URLCONF=ODD_URLS)
def test_what_one_policy_cannot_express_is_skipped_with_the_reason():
    out = run("adopt")
    # No glob matches items and orders without mixed: their URL names, listed, do.
    assert "created: drf-user: sliding_log, 3 per 60 s per user_or_ip, endpoint items,orders" in out
    assert (
        "skipped: ByHeaderThrottle: ByHeaderThrottle defines get_cache_key: ratelimits "
        "cannot tell what its own code admits\n  on /api/by-header/ (by-header)"
    ) in out
    assert (
        "skipped: SearchBurstThrottle, SearchThrottle (scope search): they share DRF's "
        "counter throttle_search_<client> at different rates"
    ) in out
    assert set(stored()) == {"drf-uploads", "drf-user"}
    assert stored()["drf-uploads"][0] == "uploads"


@override_settings(ROOT_URLCONF="tests.adopt.spec_urls")
def test_views_carrying_a_django_ratelimit_spec_bring_their_rows():
    row = {"name": "legacy", "endpoint": "legacy", "limit": 5, "window": 60, "key": "ip"}
    plan = plan_adoption("enforce", spec_rows=lambda spec: [row] if spec == "legacy-spec" else [])
    adopted = {a.row["name"]: a for a in plan.adopted}
    assert adopted["legacy"].row == {**row, "mode": "enforce"}
    assert adopted["legacy"].replaces == ["django-ratelimit on /legacy/ (legacy)"]
    unread = plan_adoption("shadow", spec_rows=lambda spec: None)
    assert [(s.what, s.views) for s in unread.skipped] == [
        ("django-ratelimit", ["/legacy/ (legacy)"])
    ]


@override_settings(ROOT_URLCONF="tests.adopt.django_ratelimit_urls")
def test_the_django_ratelimit_decorators_views_are_adopted_one_policy_per_counter():
    out = run("adopt", "--mode", "enforce")
    policies = {p.name: p for p in Policy.objects.all()}
    assert len(policies) == 2, out  # the search group's two views share one counter
    # Each policy is the compat decorator's own (its endpoint its name, which no URL
    # name matches): the group, the key, the methods and the rate.
    assert all(p.endpoint == p.name for p in policies.values())
    search = policies["dr-search-ip-all-10-60s"]
    assert (search.limit, search.window, search.key, search.mode) == (10, 60, "ip", "enforce")
    (signup,) = (p for p in policies.values() if p is not search)
    # The method's group is django-ratelimit's (the class's dotted name and the method),
    # shortened with a digest.
    assert signup.name.startswith("dr-tests-adopt-django_ratelimit_urls-"), signup.name
    assert signup.name.endswith("-ip-post-5-3600s"), signup.name
    assert (signup.limit, signup.window, signup.methods) == (5, 3600, "POST")
    assert "skipped" not in out
    assert run("adopt", "--mode", "enforce").strip().endswith("Nothing to change.")


def test_a_subclass_of_the_anonymous_throttle_that_sets_its_rate_is_adopted_as_anon():
    class StrictAnonThrottle(AnonRateThrottle):
        scope = "strict"
        rate = "1/min"

    counter = read_throttle(StrictAnonThrottle, None)
    assert (counter.scope, counter.counts, counter.limit, counter.window) == ("strict", ANON, 1, 60)
    assert counter_row("drf-strict", "strict", counter, "shadow")["key"] == "anon"
