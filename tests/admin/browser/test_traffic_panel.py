"""The Traffic panel in a real browser: after traffic through the live site, the chart
renders with a bar per level and the limit marked, the table reads the same numbers, the
what-if answers a typed limit with its bounds, and "Try it in shadow" saves a shadow twin
of the enforcing policy, logged in the admin history. The screenshot in
``docs/screenshots/traffic-panel.png`` is taken here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from ratelimits.engine.traffic import record
from ratelimits.models import Policy
from tests.helpers import ratelimits_settings

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

USERNAME = "operator"
PASSWORD = "browser-test-password"
DOCS_SCREENSHOT = Path(__file__).resolve().parents[3] / "docs" / "screenshots"
#: Requests per client: honest ones at known rates, one abuser over the limit of 20.
USES = [1, 2, 3, 3, 4, 5, 6, 7, 8, 9, 11, 12, 14, 17, 70]


def test_the_panel_charts_answers_what_if_and_tries_a_limit_in_shadow(
    page, live_server, screenshot_dir, settings
):
    # The browser's requests come from 127.0.0.1, a trusted proxy naming each client.
    settings.RATELIMITS = ratelimits_settings(TRUSTED_PROXIES=["127.0.0.1"])
    get_user_model().objects.create_superuser(USERNAME, "operator@example.com", PASSWORD)
    search = Policy.objects.create(
        name="search", endpoint="search", algorithm="fixed_window", limit=20, window=86400, key="ip"
    )
    for i, n in enumerate(USES):
        for _ in range(n):
            page.request.get(
                live_server.url + "/api/search/", headers={"X-Forwarded-For": f"198.51.100.{i}"}
            )
    record.flush()

    page.goto(f"/admin/ratelimits/policy/{search.pk}/change/")
    page.locator("#id_username").fill(USERNAME)
    page.locator("#id_password").fill(PASSWORD)
    page.locator("input[type=submit]").click()
    page.wait_for_url(f"**/admin/ratelimits/policy/{search.pk}/change/")

    panel = page.locator("#ratelimits-traffic")
    expect(panel.locator("svg.ratelimits-traffic-chart")).to_be_visible()
    expect(panel.locator("svg .bar[data-level='1']")).to_have_attribute("data-clients", "15")
    expect(panel.locator("svg .bar[data-level='20']")).to_have_attribute("data-clients", "1")
    expect(panel.locator("svg line.limit")).to_have_count(1)
    expect(panel.locator(".ratelimits-traffic-totals")).to_contain_text(
        f"{sum(USES)} requests, 50 denied"
    )

    page.locator("#ratelimits-what-if").fill("8")
    page.locator("#ratelimits-traffic button", has_text="Show").click()
    answer = panel.locator(".ratelimits-what-if")
    expect(answer).to_have_attribute("data-limit", "8")
    # Truth: 6 clients used more than 8 (9, 11, 12, 14, 17, 70), with 85 requests over 8
    # (1 + 3 + 4 + 6 + 9 + 62). 9 lies between the levels 8 and 10: the clients are between
    # those who reached 10 (5) and 8 (7).
    expect(answer).to_contain_text("about 6 clients (between 5 and 7)")
    text = answer.inner_text()
    low, high = (int(x) for x in text.split("requests (between ")[1].split(")")[0].split(" and "))
    assert low <= sum(max(0, n - 8) for n in USES) == 85 <= high
    expect(panel.locator(".ratelimits-suggested-limit")).to_have_text("32")
    panel.screenshot(path=screenshot_dir / "traffic-panel.png")
    DOCS_SCREENSHOT.mkdir(parents=True, exist_ok=True)
    shutil.copy(screenshot_dir / "traffic-panel.png", DOCS_SCREENSHOT / "traffic-panel.png")

    page.locator("#ratelimits-try-in-shadow").click()
    page.wait_for_url("**/admin/ratelimits/policy/*/change/")
    expect(page.locator(".messagelist .success")).to_contain_text("search-shadow")
    twin = Policy.objects.get(name="search-shadow")
    assert (twin.mode, twin.limit, twin.endpoint, twin.algorithm) == (
        "shadow",
        8,
        "search",
        "fixed_window",
    )
    search.refresh_from_db()
    assert (search.mode, search.limit) == ("enforce", 20)  # still enforcing its own limit
    logged = LogEntry.objects.filter(object_id=str(twin.pk)).order_by("action_time")
    assert [e.action_flag for e in logged] == [1, 2]  # added, then changed
    assert "Trying the limit 8 in shadow" in logged[1].change_message
