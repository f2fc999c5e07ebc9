"""An operator in a real browser, end to end: add a login policy in the admin, watch the
API enforce it, raise the limit in the changelist and the API follows, see the denial on
the dashboard, reset the client from the live-usage panel, and watch the memory estimate
follow the form.

Screenshots of the changelist, the change page (live usage showing the client) and the
dashboard go to ``test-output/screenshots/<test name>/``; ``docs/screenshots/`` holds
copies of them for the README.
"""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from ratelimits.admin.widgets import large_log_advice
from ratelimits.engine.reporting import stats
from ratelimits.models import Policy
from ratelimits.tools.memory import bytes_per_client, human, is_large

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

USERNAME = "operator"
PASSWORD = "browser-test-password"
CLIENT = "ip:127.0.0.1"  # who the API calls come from, as the live-usage panel names them
CLIENT_KEY = "rl:{ip:127.0.0.1}:login:log"
#: Seconds the scenario waits for the raised limit to reach the API before it fails: far
#: beyond what even a loaded machine takes.
WAIT = 30.0


def set_field(page, field_id: str, value: str) -> None:
    """Type into an input, or choose in a select: by the admin's stable ``id_<field>``."""
    field = page.locator(f"#{field_id}")
    if field.evaluate("element => element.tagName") == "SELECT":
        field.select_option(value)
    else:
        field.fill(value)


def save_and_see_changelist(page) -> None:
    """The "Save" button (of a change form or the changelist's list_editable form); the
    admin answers with the changelist and a success message."""
    page.locator("input[name=_save]").click()
    page.wait_for_url("**/admin/ratelimits/policy/")
    expect(page.locator(".messagelist .success")).to_have_count(1)


def call_login(page, live_server):
    """POST /api/login/ from the page's context, with the operator's credentials."""
    return page.request.post(
        live_server.url + "/api/login/", form={"username": USERNAME, "password": PASSWORD}
    )


def login_keys(redis_client) -> list[str]:
    return sorted(key.decode() for key in redis_client.scan_iter(match="rl:*:login:*"))


def test_operator_scenario_policy_limit_dashboard_reset_and_memory_estimate(
    page, live_server, redis_client, screenshot_dir
):
    get_user_model().objects.create_superuser(USERNAME, "operator@example.com", PASSWORD)

    # 1. Sign in and add the policy through the add form: 3 POSTs per 60 s per IP.
    page.goto("/admin/ratelimits/policy/")
    assert "/admin/login/" in page.url  # not signed in yet
    page.locator("#id_username").fill(USERNAME)
    page.locator("#id_password").fill(PASSWORD)
    page.locator("input[type=submit]").click()
    page.wait_for_url("**/admin/ratelimits/policy/")
    # Fold the admin's navigation sidebar (remembered in localStorage for the rest of the
    # test), so the changelist's columns fit the 1440 px viewport of conftest.py.
    page.locator("#toggle-nav-sidebar").click()
    expect(page.locator("#nav-sidebar")).to_be_hidden()

    page.locator("#content a[href$='/admin/ratelimits/policy/add/']").first.click()
    page.wait_for_url("**/admin/ratelimits/policy/add/")
    for field_id, value in [
        ("id_name", "login"),
        ("id_endpoint", "api:login"),  # the demo's LoginView is the URL name api:login
        ("id_methods", "POST"),
        ("id_algorithm", "sliding_log"),
        ("id_limit", "3"),
        ("id_window", "60"),
        ("id_key", "ip"),
    ]:
        set_field(page, field_id, value)
    save_and_see_changelist(page)
    policy = Policy.objects.get(name="login")
    assert (policy.endpoint, policy.methods, policy.algorithm) == (
        "api:login",
        "POST",
        "sliding_log",
    )
    assert (policy.limit, policy.window, policy.key, policy.enabled) == (3, 60, "ip", True)

    # 2. Three calls pass, the fourth is denied with a Retry-After.
    statuses = [call_login(page, live_server).status for _ in range(3)]
    assert statuses == [200, 200, 200]
    denied = call_login(page, live_server)
    assert denied.status == 429
    assert 1 <= int(denied.headers["retry-after"]) <= 60
    # The live server thread counted in the Redis server that tests/conftest.py started.
    assert login_keys(redis_client) == [CLIENT_KEY]

    # 3. Raise the limit to 5 in the changelist (list_editable) and the API follows.
    # The live server is a thread of this process: flushing here sends its buffered
    # counts, so the changelist's "denied (5 min)" column already shows the denial.
    assert stats.flush()
    page.goto("/admin/ratelimits/policy/")
    row = page.locator("#result_list tbody tr").filter(has_text="api:login")
    expect(row).to_have_count(1)
    expect(row.locator("td.field-denied")).to_have_text("1")
    limit_input = row.locator("input[name='form-0-limit']")
    expect(limit_input).to_have_value("3")
    limit_input.fill("5")
    save_and_see_changelist(page)
    policy.refresh_from_db()
    assert policy.limit == 5
    row = page.locator("#result_list tbody tr").filter(has_text="api:login")
    expect(row.locator("input[name='form-0-limit']")).to_have_value("5")
    expect(row.locator("td.field-rate")).to_contain_text("5")
    # Every column fits the page (the mode select's short labels keep it narrow), the
    # last one included: no horizontal scrolling to find the denials.
    expect(row.locator("td.field-denied")).to_be_in_viewport(ratio=1)
    page.screenshot(path=screenshot_dir / "changelist.png", full_page=True)

    # The edit reaches the policy table within POLICY_REFRESH_INTERVAL (the bound is
    # tests/engine/table/test_reload.py's; here it is polled for). Denied calls consume
    # nothing, so polling until the first pass changes no count (each denial is counted
    # on the dashboard, though: ``late_denials`` keeps track).
    deadline = time.monotonic() + WAIT
    late_denials = 0
    while (response := call_login(page, live_server)).status == 429:
        late_denials += 1
        assert time.monotonic() < deadline, f"the raised limit did not reach the API in {WAIT} s"
        time.sleep(0.1)
    assert response.status == 200
    assert "q=5" in response.headers["ratelimit-policy"]

    # 4. The dashboard, opened from the admin index, shows the denial.
    assert stats.flush()
    page.goto("/admin/")
    link = page.locator("#content-main").get_by_role("link", name="Dashboard", exact=True)
    expect(link).to_have_attribute("href", "/admin/ratelimits/dashboard/")
    link.click()
    page.wait_for_url("**/admin/ratelimits/dashboard/")
    chart = page.locator("#chart-login")
    expect(chart.locator(".ratelimits-totals")).to_have_text(
        f"Last hour: 4 allowed, {1 + late_denials} denied, 0 shadow-denied."
    )
    expect(chart.locator("svg")).to_have_count(1)
    page.screenshot(path=screenshot_dir / "dashboard.png", full_page=True)

    # 5. The change page lists the client in the live-usage panel; "Reset" forgets it.
    page.goto(f"/admin/ratelimits/policy/{policy.pk}/change/")
    panel = page.locator("#ratelimits-live-usage")
    client_row = panel.locator("tr.ratelimits-client").filter(has_text=CLIENT)
    expect(client_row).to_have_count(1)
    expect(client_row.locator(".ratelimits-count")).to_have_text("4 / 5")
    panel.scroll_into_view_if_needed()
    page.screenshot(path=screenshot_dir / "change-page.png", full_page=True)

    client_row.get_by_role("button", name="Reset").click()
    page.wait_for_url(f"**/admin/ratelimits/policy/{policy.pk}/change/")
    expect(page.locator(".messagelist .success")).to_contain_text(
        f"Reset the counters of {CLIENT}: 1 keys deleted."
    )
    expect(panel.locator("tr.ratelimits-client")).to_have_count(0)
    expect(panel).to_contain_text("No client is counted under this policy right now.")
    assert login_keys(redis_client) == []
    assert call_login(page, live_server).status == 200  # a fresh window for the client

    # 6. The memory estimate follows the form as it is edited (policy_form.js, served
    # by the live server's static files handler).
    script = page.request.get(live_server.url + "/static/ratelimits/policy_form.js")
    assert script.status == 200, "the live server does not serve the admin's static files"
    memory = page.locator("#ratelimits-memory")
    # The figures the admin states (ratelimits.tools.memory), whatever they measure now.
    log_size = human(bytes_per_client("sliding_log", 1000))
    ring_size = human(bytes_per_client("compact_log", 1000))
    expect(memory).not_to_contain_text(log_size)
    expect(page.locator("#id_algorithm")).to_have_value("sliding_log")
    set_field(page, "id_limit", "1000")
    expect(memory).to_contain_text(f"About {log_size} of Redis memory per active client")
    # The advice the admin gives for this log (ratelimits.admin.widgets).
    expect(memory.locator(".ratelimits-memory-warning")).to_contain_text(
        large_log_advice("sliding_log", 1000)
    )
    set_field(page, "id_algorithm", "compact_log")
    expect(memory).to_contain_text(f"About {ring_size}")
    expect(memory.locator(".ratelimits-memory-warning")).to_have_count(
        1 if is_large("compact_log", 1000) else 0
    )
    set_field(page, "id_algorithm", "sliding_counter")
    expect(memory).to_contain_text("About 104 B")
    expect(memory.locator(".ratelimits-memory-warning")).to_have_count(0)
