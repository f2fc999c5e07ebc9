"""An operator in a real browser: add a login policy in the admin, watch the API enforce
it, raise the limit, and the API follows."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model

from ratelimits.conf import app_settings
from ratelimits.models import Policy

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

USERNAME = "operator"
PASSWORD = "browser-test-password"


def set_field(page, field_id: str, value: str) -> None:
    """Type into an input, or choose in a select: by the admin's stable ``id_<field>``."""
    field = page.locator(f"#{field_id}")
    if field.evaluate("element => element.tagName") == "SELECT":
        field.select_option(value)
    else:
        field.fill(value)


def save(page) -> None:
    """The standard "Save" button; the admin answers with the changelist and a message."""
    page.locator("input[name=_save]").click()
    page.wait_for_url("**/admin/ratelimits/policy/")
    assert page.locator(".messagelist .success").count() == 1


def call_login(page, live_server):
    """POST /api/login/ from the page's context, with the operator's credentials."""
    return page.request.post(
        live_server.url + "/api/login/", form={"username": USERNAME, "password": PASSWORD}
    )


def test_a_policy_added_and_edited_in_the_admin_limits_the_api(
    page, live_server, redis_client, screenshot_dir
):
    get_user_model().objects.create_superuser(USERNAME, "operator@example.com", PASSWORD)

    page.goto("/admin/ratelimits/policy/")
    assert "/admin/login/" in page.url  # not signed in yet
    page.locator("#id_username").fill(USERNAME)
    page.locator("#id_password").fill(PASSWORD)
    page.locator("input[type=submit]").click()
    page.wait_for_url("**/admin/ratelimits/policy/")

    page.locator("#content a[href$='/admin/ratelimits/policy/add/']").first.click()
    page.wait_for_url("**/admin/ratelimits/policy/add/")
    for field_id, value in [
        ("id_name", "login"),
        ("id_endpoint", "api:login"),
        ("id_methods", "POST"),
        ("id_algorithm", "sliding_log"),
        ("id_limit", "3"),
        ("id_window", "60"),
        ("id_key", "ip"),
    ]:
        set_field(page, field_id, value)
    save(page)
    policy = Policy.objects.get(name="login")
    assert (policy.endpoint, policy.methods, policy.algorithm) == (
        "api:login",
        "POST",
        "sliding_log",
    )
    assert (policy.limit, policy.window, policy.key, policy.enabled) == (3, 60, "ip", True)
    assert "api:login" in page.locator("#result_list").inner_text()
    page.screenshot(path=screenshot_dir / "changelist.png", full_page=True)

    statuses = [call_login(page, live_server).status for _ in range(3)]
    assert statuses == [200, 200, 200]
    denied = call_login(page, live_server)
    assert denied.status == 429
    assert 1 <= int(denied.headers["retry-after"]) <= 60
    # The live server thread counted in the Redis server that tests/conftest.py started.
    assert [key.decode() for key in redis_client.scan_iter(match="rl:*:login:log")] == [
        "rl:{ip:127.0.0.1}:login:log"
    ]

    page.goto(f"/admin/ratelimits/policy/{policy.pk}/change/")
    assert page.locator("#id_limit").input_value() == "3"
    set_field(page, "id_limit", "5")
    page.screenshot(path=screenshot_dir / "change.png", full_page=True)
    save(page)
    policy.refresh_from_db()
    assert policy.limit == 5

    # The edit reaches the policy table within POLICY_REFRESH_INTERVAL; denied calls
    # consume nothing, so polling until the first pass changes no count.
    deadline = time.monotonic() + app_settings.POLICY_REFRESH_INTERVAL + 2.0
    while (response := call_login(page, live_server)).status == 429:
        assert time.monotonic() < deadline, "the raised limit did not reach the API in time"
        time.sleep(0.1)
    assert response.status == 200
    assert "q=5" in response.headers["ratelimit-policy"]
