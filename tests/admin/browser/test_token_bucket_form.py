"""An operator adds a token bucket in a real browser: the form takes its burst and shows
a bucket's memory, and the API then lets a burst through and holds the steady rate."""

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
