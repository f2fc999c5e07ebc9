"""Operating limits from the admin: list edits, actions, history, permissions, live usage,
resets, the memory estimate and endpoint suggestions. Against the real Redis."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from ratelimits.engine import limiter
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.models import Policy
from ratelimits.tools import memory
from tests.helpers import history, make_policy, staff_client, use

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/ratelimits/policy/"


def test_limit_window_mode_enabled_are_editable_in_the_list(admin_client):
    policy = make_policy()
    data = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": str(policy.pk),
        "form-0-limit": "9",
        "form-0-window": "30",
        "form-0-mode": "shadow",
        "_save": "Save",
    }
    response = admin_client.post(CHANGELIST, data)
    assert response.status_code == 302
    policy.refresh_from_db()
    assert (policy.limit, policy.window, policy.mode, policy.enabled) == (9, 30, "shadow", False)
    assert "Changed Limit, Window, Mode and Enabled." in history(policy)


def test_list_edit_with_a_bad_value_saves_nothing(admin_client):
    policy = make_policy()
    data = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": str(policy.pk),
        "form-0-limit": "0",
        "form-0-window": "30",
        "form-0-mode": "enforce",
        "form-0-enabled": "on",
        "_save": "Save",
    }
    response = admin_client.post(CHANGELIST, data)
    assert response.status_code == 200
    assert "greater than or equal to 1" in response.content.decode()
    policy.refresh_from_db()
    assert (policy.limit, policy.window) == (5, 60)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("user", ["a"]),
        ("ip", ["b"]),
        ("header", ["c"]),
        ("global", ["d"]),
        ("user_or_ip", ["e"]),
    ],
)
def test_key_kind_filter(admin_client, kind, expected):
    make_policy("a", key="user")
    make_policy("b", key="ip")
    make_policy("c", key="header:X-Api-Key")
    make_policy("d", key="global")
    make_policy("e", key="user_or_ip")
    response = admin_client.get(CHANGELIST, {"key_kind": kind})
    shown = [p.name for p in response.context["cl"].result_list]
    assert shown == expected


def test_search_by_name_and_endpoint(admin_client):
    make_policy("login")
    make_policy("search", endpoint="/api/search/*")

    def names(q: str) -> list[str]:
        return [p.name for p in admin_client.get(CHANGELIST, {"q": q}).context["cl"].result_list]

    assert names("search") == ["search"]
    assert names("api:login") == ["login"]


@pytest.mark.parametrize(
    ("action", "field", "before", "after", "message"),
    [
        ("enable", "enabled", False, True, "Changed Enabled."),
        ("disable", "enabled", True, False, "Changed Enabled."),
        ("switch_to_shadow", "mode", "enforce", "shadow", "Changed Mode."),
        ("switch_to_enforce", "mode", "shadow", "enforce", "Changed Mode."),
    ],
)
def test_actions_change_the_policies_and_write_history(
    admin_client, action, field, before, after, message
):
    first, second = make_policy("a", **{field: before}), make_policy("b", **{field: before})
    untouched = make_policy("c", **{field: before})
    response = admin_client.post(
        CHANGELIST, {"action": action, "_selected_action": [first.pk, second.pk]}
    )
    assert response.status_code == 302
    for policy in (first, second):
        policy.refresh_from_db()
        assert getattr(policy, field) == after
        assert history(policy) == [message]
    untouched.refresh_from_db()
    assert getattr(untouched, field) == before
    assert history(untouched) == []


def test_actions_need_the_change_permission():
    policy = make_policy(enabled=False)
    client = staff_client("view_policy")
    response = client.get(CHANGELIST)
    assert response.status_code == 200
    assert response.context["action_form"] is None  # no action is allowed: no action menu
    client.post(CHANGELIST, {"action": "enable", "_selected_action": [policy.pk]})
    policy.refresh_from_db()
    assert policy.enabled is False


def test_reset_action_needs_the_reset_permission(redis_client):
    policy = make_policy()
    use(policy, "ip:203.0.113.7", 3)
    client = staff_client("view_policy", "change_policy")
    actions = [
        value for value, _ in client.get(CHANGELIST).context["action_form"].fields["action"].choices
    ]
    assert "enable" in actions and "reset_counters" not in actions
    client.post(CHANGELIST, {"action": "reset_counters", "_selected_action": [policy.pk]})
    assert redis_client.exists("rl:{ip:203.0.113.7}:login:log") == 1


def test_reset_action_deletes_the_keys_of_the_selected_policies_only(admin_client, redis_client):
    login, search = make_policy("login"), make_policy("search")
    use(login, "ip:203.0.113.7", 3)
    use(login, "ip:198.51.100.1", 1)
    use(search, "ip:203.0.113.7", 2)
    response = admin_client.post(
        CHANGELIST, {"action": "reset_counters", "_selected_action": [login.pk]}, follow=True
    )
    assert "Deleted 2 keys." in response.content.decode()
    assert redis_client.keys("rl:*:login:*") == []
    assert redis_client.exists("rl:{ip:203.0.113.7}:search:log") == 1
    assert history(login) == ["Reset counters (2 keys)."]


def test_change_page_lists_the_busiest_clients(admin_client):
    policy = make_policy(limit=10)
    use(policy, "ip:203.0.113.7", 4)
    use(policy, "ip:198.51.100.1", 1)
    use(policy, "ip:192.0.2.9", 7)
    response = admin_client.get(f"{CHANGELIST}{policy.pk}/change/")
    usage = response.context["live_usage"]
    assert [(r.identity, r.count, r.remaining) for r in usage.rows] == [
        ("ip:192.0.2.9", 7.0, 3),
        ("ip:203.0.113.7", 4.0, 6),
        ("ip:198.51.100.1", 1.0, 9),
    ]
    assert all(0 < r.reset <= 60 for r in usage.rows)
    html = response.content.decode()
    assert 'id="ratelimits-live-usage"' in html
    assert 'form="ratelimits-reset-form" name="identity" value="ip:192.0.2.9"' in html
    # The reset form sits outside the policy form (forms cannot nest).
    assert html.index('id="ratelimits-reset-form"') > html.index("</form>")


def test_live_usage_of_a_token_bucket(admin_client, redis_client):
    policy = make_policy(algorithm="token_bucket", limit=2, window=60, burst=4)
    use(policy, "ip:203.0.113.7", 3)
    use(policy, "ip:198.51.100.1", 1)
    before = redis_client.dump("rl:{ip:203.0.113.7}:login:bucket")
    response = admin_client.get(f"{CHANGELIST}{policy.pk}/change/")
    usage = response.context["live_usage"]
    assert [(r.identity, round(r.count), r.remaining) for r in usage.rows] == [
        ("ip:203.0.113.7", 3, 1),  # units in the bucket, units that may still come now
        ("ip:198.51.100.1", 1, 3),
    ]
    assert all(0 < r.reset <= 30 for r in usage.rows)  # one unit frees every 30 s
    assert redis_client.dump("rl:{ip:203.0.113.7}:login:bucket") == before


def test_live_usage_of_a_concurrency_policy_lists_the_requests_in_progress(
    admin_client, redis_client
):
    policy = make_policy(algorithm="concurrency", limit=3, window=60)
    compiled = CompiledPolicy.from_model(policy)
    busy, calm = "ip:203.0.113.7", "ip:198.51.100.1"
    now_us = int(redis_client.time()[0]) * 1_000_000

    def take(who: str, at: float | None = None) -> limiter.Receipt:
        verdict = limiter.decide([limiter.Check(compiled, who)], now=at)
        assert verdict.allowed and verdict.receipt is not None
        return verdict.receipt

    take(busy, at=now_us / 1_000_000 - 20)  # in progress for 20 s: its lease ends in 40 s
    take(busy)
    given_back = take(busy)
    take(calm)
    take(calm, at=now_us / 1_000_000 - 100)  # stored, but its lease ended 40 s ago
    assert redis_client.zcard(f"rl:{{{calm}}}:login:leases") == 3  # 2 leases, their total
    limiter.give_back(given_back, 200)
    before = {who: redis_client.dump(f"rl:{{{who}}}:login:leases") for who in (busy, calm)}

    response = admin_client.get(f"{CHANGELIST}{policy.pk}/change/")
    usage = response.context["live_usage"]
    assert usage.concurrency is True
    assert [(r.identity, r.count, r.remaining, len(r.leases)) for r in usage.rows] == [
        (busy, 2.0, 1, 2),
        (calm, 1.0, 2, 1),
    ]
    oldest, newest = usage.rows[0].leases
    assert 20 <= oldest.age < 25 and oldest.ends_in == pytest.approx(60 - oldest.age, abs=0.01)
    assert 0 <= newest.age < 5 and newest.ends_in == pytest.approx(60 - newest.age, abs=0.01)
    (only,) = usage.rows[1].leases
    assert 0 <= only.age < 5
    html = response.content.decode()
    assert "requests in progress: age, lease ends in" in html
    assert "next slot frees in" not in html
    assert html.count('class="ratelimits-lease"') == 3
    assert f"{oldest.age:.1f} s old, ends in {oldest.ends_in:.1f} s" in html
    # Looking took no slot and pruned nothing.
    assert {who: redis_client.dump(f"rl:{{{who}}}:login:leases") for who in before} == before


def test_live_usage_lists_at_most_ten_leases_of_a_client(admin_client):
    policy = make_policy(algorithm="concurrency", limit=15, window=60)
    compiled = CompiledPolicy.from_model(policy)
    for _ in range(12):
        assert limiter.decide([limiter.Check(compiled, "ip:203.0.113.7")]).allowed
    response = admin_client.get(f"{CHANGELIST}{policy.pk}/change/")
    (row,) = response.context["live_usage"].rows
    assert (row.count, len(row.leases), row.more_leases) == (12.0, 10, 2)
    assert [lease.age for lease in row.leases] == sorted(
        (lease.age for lease in row.leases), reverse=True
    )  # oldest first
    assert "and 2 more" in response.content.decode()


def test_live_usage_of_other_algorithms_has_no_leases(admin_client):
    policy = make_policy()
    use(policy, "ip:203.0.113.7", 2)
    response = admin_client.get(f"{CHANGELIST}{policy.pk}/change/")
    usage = response.context["live_usage"]
    assert usage.concurrency is False and usage.rows[0].leases == ()
    assert "next slot frees in" in response.content.decode()


def test_reset_of_a_concurrency_policy_frees_its_slots(admin_client, redis_client):
    policy = make_policy(algorithm="concurrency", limit=1, window=60)
    compiled = CompiledPolicy.from_model(policy)
    check = limiter.Check(compiled, "ip:203.0.113.7")
    assert limiter.decide([check]).allowed
    assert not limiter.decide([check]).allowed
    url = f"{CHANGELIST}{policy.pk}/reset-counters/"
    response = admin_client.post(url, {"identity": "ip:203.0.113.7"}, follow=True)
    assert "1 keys deleted" in response.content.decode()
    assert not redis_client.exists("rl:{ip:203.0.113.7}:login:leases")
    assert limiter.decide([check]).allowed


def test_reading_the_change_page_consumes_nothing(admin_client, redis_client):
    policy = make_policy()
    use(policy, "ip:203.0.113.7", 2)
    before = redis_client.dump("rl:{ip:203.0.113.7}:login:log")
    admin_client.get(f"{CHANGELIST}{policy.pk}/change/")
    assert redis_client.dump("rl:{ip:203.0.113.7}:login:log") == before


def test_reset_one_client_from_the_panel(admin_client, redis_client):
    policy = make_policy()
    use(policy, "ip:203.0.113.7", 3)
    use(policy, "ip:198.51.100.1", 1)
    url = f"{CHANGELIST}{policy.pk}/reset-counters/"
    response = admin_client.post(url, {"identity": "ip:203.0.113.7"}, follow=True)
    assert "Reset the counters of ip:203.0.113.7: 1 keys deleted." in response.content.decode()
    assert redis_client.exists("rl:{ip:203.0.113.7}:login:log") == 0
    assert redis_client.exists("rl:{ip:198.51.100.1}:login:log") == 1
    assert history(policy) == ["Reset counters of ip:203.0.113.7 (1 keys)."]


def test_reset_view_refuses_get_and_checks_permission_and_csrf(redis_client):
    policy = make_policy()
    use(policy, "ip:203.0.113.7", 3)
    url = f"{CHANGELIST}{policy.pk}/reset-counters/"
    viewer = staff_client("view_policy", "change_policy")
    assert viewer.get(url).status_code == 405
    assert viewer.post(url).status_code == 403
    user = User.objects.create_superuser("root", password="pw")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(url).status_code == 403
    assert redis_client.exists("rl:{ip:203.0.113.7}:login:log") == 1
    page = strict.get(f"{CHANGELIST}{policy.pk}/change/")
    token = page.context["csrf_token"]
    assert strict.post(url, {"csrfmiddlewaretoken": str(token)}).status_code == 302
    assert redis_client.exists("rl:{ip:203.0.113.7}:login:log") == 0


def test_reset_buttons_are_hidden_without_the_permission():
    policy = make_policy()
    use(policy, "ip:203.0.113.7", 1)
    client = staff_client("view_policy", "change_policy")
    html = client.get(f"{CHANGELIST}{policy.pk}/change/").content.decode()
    assert "ip:203.0.113.7" in html
    assert "ratelimits-reset-form" not in html


def test_live_usage_says_so_when_redis_is_down(admin_client, redis_server):
    policy = make_policy()
    redis_server.kill()
    try:
        response = admin_client.get(f"{CHANGELIST}{policy.pk}/change/")
        assert response.status_code == 200
        assert "Redis did not answer" in response.content.decode()
        response = admin_client.get(CHANGELIST)
        assert response.status_code == 200
    finally:
        redis_server.start()


@pytest.mark.parametrize(
    ("algorithm", "limit", "size", "warns"),
    [
        ("sliding_log", 100, "1.9 KB", False),
        ("sliding_log", 500, "47.6 KB", True),
        ("compact_log", 500, "4.2 KB", False),
        ("compact_log", 5000, "41.0 KB", True),
        ("sliding_counter", 1000, "104 B", False),
        ("fixed_window", 5, "104 B", False),
    ],
)
def test_change_form_shows_memory_per_client(admin_client, algorithm, limit, size, warns):
    policy = make_policy(algorithm=algorithm, limit=limit)
    html = admin_client.get(f"{CHANGELIST}{policy.pk}/change/").content.decode()
    assert f"About <strong>{size}</strong> of Redis memory per active client" in html
    assert ("sliding_counter (about 104 B" in html) is warns
    # A large sliding_log is pointed at the exact compact_log first.
    assert ("consider compact_log (exact too, about 4.2 KB)" in html) is (
        algorithm == "sliding_log" and warns
    )
    assert "ratelimits/policy_form.js" in html


@pytest.mark.parametrize(
    ("algorithm", "limit", "order", "warns"),
    [
        ("sliding_counter", 10**6, "O(1)", False),
        ("token_bucket", 10, "O(1)", False),
        ("sliding_log", 1000, "O(log n)", False),
        ("compact_log", 200_000, "O(log n)", True),
        ("concurrency", 200_000, "O(log n)", False),
    ],
)
def test_change_form_shows_redis_work_per_request(admin_client, algorithm, limit, order, warns):
    policy = make_policy(algorithm=algorithm, limit=limit)
    html = admin_client.get(f"{CHANGELIST}{policy.pk}/change/").content.decode()
    assert f"Redis work per request: <strong>{order}</strong>" in html
    assert "whatever the request's cost" in html
    assert ("ratelimits-work-warning" in html) is warns
    if warns:
        assert "about 18 steps" in html  # 200,000 < 2^18


def test_memory_estimate_follows_the_measured_points():
    assert memory.bytes_per_client("sliding_log", 100) == 1864
    assert memory.bytes_per_client("sliding_log", 1000) == 94336
    assert memory.bytes_per_client("compact_log", 1000) == 8264
    assert memory.bytes_per_client("compact_log", 150) == 1416  # between 100 and 200
    assert 2632 < memory.bytes_per_client("sliding_log", 129) <= 14944
    assert memory.bytes_per_client("sliding_log", 1000, memory.VALKEY_9) == 78440
    assert memory.bytes_per_client("sliding_log", 20000) > memory.bytes_per_client(
        "sliding_log", 10000
    )
    assert memory.bytes_per_client("sliding_counter", 10**6) == memory.COUNTER_BYTES


def test_memory_estimate_matches_redis(redis_client):
    """The table is a measurement: a real log at its limit costs what it says (±15 %)."""
    policy = CompiledPolicy.build(
        name="p", endpoint="x", algorithm="sliding_log", limit=300, window=600, key="ip"
    )
    for i in range(300):
        limiter.decide([limiter.Check(policy, "ip:203.0.113.7")], now=1_700_000_000 + i / 1000)
    used = redis_client.memory_usage("rl:{ip:203.0.113.7}:p:log", samples=0)
    # The figures measured on this server (Redis 7, Redis 6.2 or Valkey 9).
    measured = memory.measured_for(redis_client.info("server"))
    estimate = memory.bytes_per_client("sliding_log", 300, measured)
    assert abs(used - estimate) / used < 0.15


@pytest.mark.parametrize("limit", [20, 300])
def test_memory_estimate_of_concurrency_matches_redis(redis_client, limit):
    """A client with ``limit`` requests in progress holds ``limit`` leases: the estimate is
    what Redis counts for them (±15 %), a sorted set, not a counter's small hash."""
    policy = CompiledPolicy.build(
        name="p", endpoint="x", algorithm="concurrency", limit=limit, window=600, key="ip"
    )
    for i in range(limit):
        verdict = limiter.decide([limiter.Check(policy, "ip:203.0.113.7")])
        assert verdict.allowed, i
    key = "rl:{ip:203.0.113.7}:p:leases"
    assert redis_client.zcard(key) == limit + 1  # the leases and their running total
    used = redis_client.memory_usage(key, samples=0)
    measured = memory.measured_for(redis_client.info("server"))
    estimate = memory.bytes_per_client("concurrency", limit, measured)
    assert abs(used - estimate) / used < 0.15


def test_change_form_shows_the_memory_of_requests_in_progress(admin_client):
    small = make_policy("small", algorithm="concurrency", limit=5)
    html = admin_client.get(f"{CHANGELIST}{small.pk}/change/").content.decode()
    assert "About <strong>280 B</strong> of Redis memory per active client" in html
    assert "(concurrency at 5 in progress at once)" in html
    # Large, but no other algorithm counts requests in progress: nothing to suggest.
    large = make_policy("large", algorithm="concurrency", limit=1000)
    html = admin_client.get(f"{CHANGELIST}{large.pk}/change/").content.decode()
    assert "About <strong>118.8 KB</strong> of Redis memory per active client" in html
    assert "ratelimits-memory-warning" not in html
    assert '"concurrency": [[1, 136]' in html.replace("&quot;", '"')  # for policy_form.js


def test_endpoint_field_suggests_url_names_and_scopes(admin_client):
    html = admin_client.get(f"{CHANGELIST}add/").content.decode()
    assert 'list="ratelimits-endpoint-suggestions"' in html
    assert '<option value="api:login">' in html
    assert '<option value="search">throttle_scope of SearchView</option>' in html
    assert 'value="admin:index"' not in html


def test_view_only_staff_see_but_cannot_change():
    policy = make_policy()
    client = staff_client("view_policy")
    assert client.get(f"{CHANGELIST}{policy.pk}/change/").status_code == 200
    response = client.post(f"{CHANGELIST}{policy.pk}/change/", {"limit": "1"})
    assert response.status_code == 403
    assert client.get(f"{CHANGELIST}add/").status_code == 403


def test_staff_without_permissions_see_nothing():
    policy = make_policy()
    client = staff_client()
    assert client.get(CHANGELIST).status_code == 403
    assert client.get(f"{CHANGELIST}{policy.pk}/change/").status_code == 403
    assert client.post(f"{CHANGELIST}{policy.pk}/reset-counters/").status_code == 403


def deny_twice(policy: Policy) -> None:
    """One admission then two denials at limit 1, flushed to Redis."""
    from ratelimits.engine.reporting import stats

    use(policy, "ip:203.0.113.7", 3)
    assert stats.flush()


def test_changelist_shows_denials_of_the_last_minutes(admin_client):
    login, quiet = make_policy("login", limit=1), make_policy("quiet")
    deny_twice(login)
    html = admin_client.get(CHANGELIST).content.decode()
    assert "Denied (5 min)" in html
    rows = {p.name: p for p in [login, quiet]}
    assert '<td class="field-denied">2</td>' in html.split(f">{rows['login'].name}<")[1]
    assert '<td class="field-denied">0</td>' in html.split(f">{rows['quiet'].name}<")[1]


def test_changelist_still_works_when_redis_is_down(admin_client, redis_server):
    make_policy("login")
    redis_server.kill()
    try:
        response = admin_client.get(CHANGELIST)
        assert response.status_code == 200
        assert 'title="Redis did not answer">?</span>' in response.content.decode()
    finally:
        redis_server.start()


def test_dashboard_is_linked_from_the_index_and_draws_each_policy(admin_client):
    login = make_policy("login", limit=1)
    make_policy("search", endpoint="search")
    deny_twice(login)
    index = admin_client.get("/admin/").content.decode()
    assert 'href="/admin/ratelimits/dashboard/"' in index
    response = admin_client.get("/admin/ratelimits/dashboard/")
    assert response.status_code == 200
    html = response.content.decode()
    assert [c["policy"] for c in response.context["charts"]] == ["login", "search"]
    assert response.context["charts"][0]["totals"] == {
        "allowed": 1,
        "denied": 2,
        "shadow_denied": 0,
    }
    assert "Last hour: 1 allowed, 2 denied, 0 shadow-denied." in html
    sections = html.split('class="module ratelimits-chart"')[1:]
    assert len(sections) == 2 and all("<svg" in section for section in sections)


def test_dashboard_shows_near_limit_beside_allowed_and_denied(admin_client, settings):
    from ratelimits.engine.reporting import stats

    settings.RATELIMITS = {**settings.RATELIMITS, "NEAR_LIMIT": 0.8}
    login = make_policy("login", limit=10)
    search = make_policy("search", endpoint="search", limit=10)
    use(login, "ip:203.0.113.7", 11)  # the 8th crosses, the 11th is denied
    use(login, "ip:203.0.113.8", 8)  # another client crosses too
    use(search, "ip:203.0.113.7", 7)  # never near
    assert stats.flush()
    response = admin_client.get("/admin/ratelimits/dashboard/")
    charts = {chart["policy"]: chart for chart in response.context["charts"]}
    assert (charts["login"]["near_limit"], charts["search"]["near_limit"]) == (2, 0)
    assert charts["login"]["totals"] == {"allowed": 18, "denied": 1, "shadow_denied": 0}
    html = response.content.decode()
    login_html, search_html = html.split('id="chart-login"')[1].split('id="chart-search"')
    assert "Last hour: 18 allowed, 1 denied, 0 shadow-denied." in login_html
    assert (
        '<p class="ratelimits-near-limit">Near the limit: 2 (allowed requests that took a '
        "client to 80% of its limit).</p>"
    ) in login_html
    assert "Near the limit: 0 " in search_html
    # The chart draws a near-limit line where there is one, and says its total.
    assert 'data-outcome="near_limit"' in login_html and "near limit (2)" in login_html
    assert 'data-outcome="near_limit"' not in search_html


def test_dashboard_follows_the_policy_view_permission():
    make_policy("login")
    viewer = staff_client("view_policy")
    assert viewer.get("/admin/ratelimits/dashboard/").status_code == 200
    nobody = Client()
    nobody.force_login(User.objects.create_user("nobody", password="pw", is_staff=True))
    assert nobody.get("/admin/ratelimits/dashboard/").status_code == 403
    assert "/admin/ratelimits/dashboard/" not in nobody.get("/admin/").content.decode()


def test_dashboard_says_so_when_redis_is_down(admin_client, redis_server):
    make_policy("login")
    redis_server.kill()
    try:
        response = admin_client.get("/admin/ratelimits/dashboard/")
        assert response.status_code == 200
        assert "Redis did not answer" in response.content.decode()
    finally:
        redis_server.start()
