"""Live usage on a policy's change page and the dashboard's clients, with overrides: each
client is shown under the limit that applies to it and says which override applied. The
traffic is real requests to the demo's ``/api/search/`` (``throttle_scope = "search"``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from ratelimits.models import Policy, PolicyOverride
from ratelimits.testutils import reset_state
from tests.helpers import logged_in, override_site, staff_client

pytestmark = pytest.mark.django_db

DASHBOARD = "/admin/ratelimits/dashboard/"


def search(client: Client, times: int) -> None:
    for _ in range(times):
        client.get("/api/search/")


@pytest.fixture
def site() -> dict[str, Any]:
    """``search``: 3 per 60 s by user or address. bob's override gives him 6, alice's
    group (partners) 6; carol's group (staff) is exempt once she has made requests. bob
    and alice made 5 requests each, carol 2, 198.51.100.1 (no override) 2."""
    made = override_site()
    bob, alice, carol, policy = made.bob, made.alice, made.carol, made.search
    reset_state()
    search(logged_in(bob), 5)
    search(logged_in(alice), 5)
    search(logged_in(carol), 2)
    search(Client(REMOTE_ADDR="198.51.100.1"), 2)
    PolicyOverride.objects.create(policy=policy, group=made.staff, exempt=True)
    return {"bob": bob, "alice": alice, "carol": carol, "policy": policy}


def test_live_usage_shows_each_clients_limit_and_override(admin_client, site):
    bob, alice, carol = site["bob"], site["alice"], site["carol"]
    response = admin_client.get(f"/admin/ratelimits/policy/{site['policy'].pk}/change/")
    rows = {row.identity: row for row in response.context["live_usage"].rows}
    assert {
        who: (r.count, r.limit, r.remaining, r.override, r.exempt) for who, r in rows.items()
    } == {
        f"u:{bob.pk}": (5.0, 6, 1, "user bob", False),
        f"u:{alice.pk}": (5.0, 6, 1, "group partners", False),
        f"u:{carol.pk}": (0.0, None, 0, "group staff", True),
        "ip:198.51.100.1": (2.0, 3, 1, "", False),
    }
    assert list(rows)[-1] == f"u:{carol.pk}"  # an exempt client comes last
    html = response.content.decode()
    cells = html.split('<tr class="ratelimits-client">')[1:]
    bob_row = next(cell for cell in cells if f"<code>u:{bob.pk}</code>" in cell)
    assert "override: user bob" in bob_row
    assert '<td class="ratelimits-count">5 / 6</td>' in bob_row
    carol_row = next(cell for cell in cells if f"<code>u:{carol.pk}</code>" in cell)
    assert "override: group staff" in carol_row
    assert '<td class="ratelimits-count">exempt</td>' in carol_row
    plain = next(cell for cell in cells if "<code>ip:198.51.100.1</code>" in cell)
    assert "override" not in plain and '<td class="ratelimits-count">2 / 3</td>' in plain


def test_the_dashboard_lists_clients_nearest_their_own_limits(admin_client, site):
    bob, alice = site["bob"], site["alice"]
    Policy.objects.create(name="quiet", endpoint="quiet", limit=5, window=60)
    response = admin_client.get(DASHBOARD)
    charts = {chart["policy"]: chart for chart in response.context["charts"]}
    assert charts["quiet"]["clients"] == []
    rows = charts["search"]["clients"]
    # bob and alice used 5 of their 6, the address 2 of its 3; carol is exempt: not listed.
    found = [(r.identity, r.count, r.limit, r.remaining, r.override) for r in rows]
    assert sorted(found[:2]) == sorted(
        [(f"u:{bob.pk}", 5.0, 6, 1, "user bob"), (f"u:{alice.pk}", 5.0, 6, 1, "group partners")]
    )
    assert found[2:] == [("ip:198.51.100.1", 2.0, 3, 1, "")]
    section = response.content.decode().split('id="chart-search"')[1].split("</section>")[0]
    bob_row = section.split(f"<code>u:{bob.pk}</code>")[1].split("</tr>")[0]
    assert '<td class="ratelimits-count">5 / 6</td>' in bob_row
    assert '<td class="ratelimits-override">user bob</td>' in bob_row
    assert '<td class="ratelimits-override">group partners</td>' in section


def test_the_dashboards_clients_follow_the_policy_view_permission(site):
    html = staff_client("view_policy").get(DASHBOARD).content.decode()
    assert f"<code>u:{site['bob'].pk}</code>" in html
