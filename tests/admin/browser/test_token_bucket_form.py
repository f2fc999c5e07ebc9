"""The policy form in a real browser. An operator adds a token bucket: the form takes its
burst and shows a bucket's memory, and the API then lets a burst through and holds the
steady rate. Another adds a calendar quota with a lockout: the form hides the window the
period sets, shows the zone, and estimates the lock."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from ratelimits.models import Policy
from ratelimits.tools import memory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

USERNAME = "operator"
PASSWORD = "browser-test-password"


def test_add_a_token_bucket_policy_and_the_api_bursts(page, live_server, screenshot_dir):
    get_user_model().objects.create_superuser(USERNAME, "operator@example.com", PASSWORD)
    page.goto("/admin/ratelimits/policy/add/")
    page.locator("#id_username").fill(USERNAME)
    page.locator("#id_password").fill(PASSWORD)
    page.locator("input[type=submit]").click()
    page.wait_for_url("**/admin/ratelimits/policy/add/")

    page.locator("#id_name").fill("items-bucket")
    page.locator("#id_endpoint").fill("api:items")
    page.locator("#id_algorithm").select_option("token_bucket")
    page.locator("#id_limit").fill("2")
    page.locator("#id_window").fill("60")
    page.locator("#id_burst").fill("4")
    page.locator("#id_key").fill("ip")
    # The estimate follows the algorithm: one small value per client, at any limit.
    expect(page.locator("#ratelimits-memory")).to_contain_text(memory.human(memory.BUCKET_BYTES))
    page.screenshot(path=screenshot_dir / "token-bucket-form.png", full_page=True)
    page.locator("input[name=_save]").click()
    page.wait_for_url("**/admin/ratelimits/policy/")
    expect(page.locator(".messagelist .success")).to_have_count(1)
    row = page.locator("#result_list tbody tr").filter(has_text="items-bucket")
    expect(row.locator("td.field-rate")).to_contain_text("2 per 60 s, burst 4")

    policy = Policy.objects.get(name="items-bucket")
    assert (policy.algorithm, policy.limit, policy.window, policy.burst) == (
        "token_bucket",
        2,
        60,
        4,
    )
    # Four at once, then one every 30 s (2 per 60 s): the fifth waits 30 s.
    statuses = [page.request.get(live_server.url + "/api/items/") for _ in range(5)]
    assert [r.status for r in statuses] == [200, 200, 200, 200, 429]
    assert 29 <= int(statuses[4].headers["retry-after"]) <= 30
    assert statuses[0].headers["ratelimit"] == '"items-bucket";r=3;t=30'


def test_a_calendar_quota_with_a_lockout_shows_the_zone_not_the_window(page, screenshot_dir):
    """Choosing a calendar period hides the window (the period sets it) and shows its time
    zone; the estimate says how long counts are kept and what a lock costs. Back on a
    rolling window, the window typed before returns and the zone is neither shown nor sent."""
    get_user_model().objects.create_superuser(USERNAME, "operator@example.com", PASSWORD)
    page.goto("/admin/ratelimits/policy/add/")
    page.locator("#id_username").fill(USERNAME)
    page.locator("#id_password").fill(PASSWORD)
    page.locator("input[type=submit]").click()
    page.wait_for_url("**/admin/ratelimits/policy/add/")
    window, zone = page.locator(".form-row.field-window"), page.locator(".form-row.field-time_zone")
    expect(window).to_be_visible()
    expect(zone).to_be_hidden()

    page.locator("#id_name").fill("search-quota")
    page.locator("#id_endpoint").fill("api:search")
    page.locator("#id_algorithm").select_option("fixed_window")
    page.locator("#id_limit").fill("10000")
    page.locator("#id_window").fill("45")
    page.locator("#id_calendar").select_option("week")
    expect(window).to_be_hidden()
    expect(zone).to_be_visible()
    page.locator("#id_calendar").select_option("")
    expect(window).to_be_visible()
    expect(page.locator("#id_window")).to_have_value("45")  # as typed
    expect(zone).to_be_hidden()
    expect(page.locator("#id_time_zone")).to_be_disabled()

    page.locator("#id_calendar").select_option("month")
    page.locator("#id_time_zone").fill("Europe/Berlin")
    page.locator("#id_lockout").fill("900")
    page.locator("#id_key").fill("ip")
    estimate = page.locator("#ratelimits-memory")
    expect(estimate).to_contain_text("(fixed_window at 10000 per calendar month)")
    expect(estimate).to_contain_text("kept until its calendar month ends (up to a month")
    expect(estimate).to_contain_text(
        f"A locked-out client adds about {memory.human(memory.LOCK_BYTES)} for its lock, "
        "kept 15 min."
    )
    page.screenshot(path=screenshot_dir / "calendar-quota-form.png", full_page=True)
    page.locator("input[name=_save]").click()
    page.wait_for_url("**/admin/ratelimits/policy/")
    row = page.locator("#result_list tbody tr").filter(has_text="search-quota")
    expect(row.locator("td.field-rate")).to_have_text(
        "10,000 per calendar month (Europe/Berlin), then locked out 15 min"
    )
    policy = Policy.objects.get(name="search-quota")
    assert (policy.calendar, policy.time_zone, policy.window, policy.lockout) == (
        "month",
        "Europe/Berlin",
        2592000,
        900,
    )

    # Back to a rolling window on the change page: the zone goes with the calendar.
    page.goto(f"/admin/ratelimits/policy/{policy.pk}/change/")
    expect(window).to_be_hidden()
    expect(page.locator("#id_time_zone")).to_have_value("Europe/Berlin")
    page.locator("#id_calendar").select_option("")
    page.locator("#id_window").fill("3600")
    page.locator("input[name=_save]").click()
    page.wait_for_url("**/admin/ratelimits/policy/")
    policy.refresh_from_db()
    assert (policy.calendar, policy.time_zone, policy.window) == ("", "", 3600)
